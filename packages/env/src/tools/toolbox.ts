/**
 * One episode's tools: validates arguments, runs a tool, and turns every failure into an
 * observation the model can read. Nothing a model writes makes it throw.
 */
import type { Dataset, Observation, ToolSpec } from '../types';
import { PodAliases, SpanAliases } from './aliases';
import { errorObservation } from './bound';
import './builtin';
import { getTool, toolNames, toolSpec, type ToolContext } from './registry';
import { parseToolSettings, type ToolSettings } from './settings';
import { formatZodIssues } from '../zod-issues';

export type ArgsCheck = { ok: true; args: unknown } | { ok: false; error: string };

export class Toolbox {
  readonly ctx: ToolContext;
  /** Specs are asked for on every turn; rendering the JSON Schema once is enough. */
  private readonly specCache = new Map<string, ToolSpec>();

  constructor(dataset: Dataset, settings: ToolSettings | Record<string, unknown> = {}) {
    const s = parseToolSettings(settings);
    this.ctx = {
      dataset,
      settings: s,
      aliases: new SpanAliases(s.span_aliases),
      pods: new PodAliases(s.pod_aliases, dataset.topology.pods),
    };
  }

  get settings(): ToolSettings {
    return this.ctx.settings;
  }

  /** The name a model sees for a span id (its alias when aliases are on). */
  spanRef(spanId: string): string {
    return this.ctx.aliases.ref(spanId);
  }

  /** A text as the model reads it: every pod name its alias when pod aliases are on. */
  shown(text: string): string {
    return this.ctx.pods.show(text);
  }

  /** Specs of the named tools, in the given order; unknown names are an error of the caller. */
  specs(names: readonly string[]): ToolSpec[] {
    return names.map((n) => {
      const cached = this.specCache.get(n);
      if (cached) return cached;
      const def = getTool(n);
      if (!def) throw new Error(`unknown tool "${n}" (known: ${toolNames().join(', ')})`);
      const spec = toolSpec(def);
      this.specCache.set(n, spec);
      return spec;
    });
  }

  isTerminal(name: string): boolean {
    return getTool(name)?.terminal ?? false;
  }

  /** Checks a model's arguments against the tool's schema; the error says which field is wrong. */
  validate(name: string, args: unknown): ArgsCheck {
    const def = getTool(name);
    if (!def) return { ok: false, error: `unknown tool "${name}"` };
    const r = def.args.safeParse(args);
    if (r.success) return { ok: true, args: r.data };
    return { ok: false, error: `invalid arguments for ${name}: ${formatZodIssues(r.error, '', { limit: 5, root: '(arguments)' })}` };
  }

  /** Valid arguments in canonical form (span and pod aliases resolved), for the episode path. */
  canonical(name: string, validArgs: unknown): unknown {
    const def = getTool(name);
    return def?.canonical ? def.canonical(this.ctx, validArgs) : validArgs;
  }

  /** Components named by valid arguments. */
  argComponents(name: string, validArgs: unknown): string[] {
    const def = getTool(name);
    if (!def) return [];
    try {
      return def.argComponents(this.ctx, validArgs);
    } catch {
      return [];
    }
  }

  /** Runs a tool on arguments already validated; a failure inside becomes an error observation. */
  run(name: string, validArgs: unknown): Observation {
    const def = getTool(name);
    if (!def) return errorObservation(this.ctx.settings, `unknown tool "${name}"`);
    let obs: Observation;
    try {
      obs = def.run(this.ctx, validArgs);
    } catch (e) {
      obs = errorObservation(this.ctx.settings, `tool ${name} failed: ${(e as Error).message ?? String(e)}`);
    }
    // Pod names are aliased in the text only: data and components keep them for scripted policies and graders.
    return this.ctx.settings.pod_aliases ? { ...obs, text: this.shown(obs.text) } : obs;
  }

  /** Validates then runs: the one call for scripted use. */
  call(name: string, args: unknown): Observation {
    const v = this.validate(name, args);
    return v.ok ? this.run(name, v.args) : errorObservation(this.ctx.settings, v.error);
  }
}
