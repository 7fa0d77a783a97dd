/**
 * Registry of the tools an episode can offer. Each tool is one file that calls
 * `registerTool`; builtin.ts imports them.
 */
import { z } from 'zod';
import type { Dataset, Observation, ToolSpec } from '../types';
import type { PodAliases, SpanAliases } from './aliases';
import type { ToolSettings } from './settings';

/** What a tool runs against: the dataset, the settings and this episode's span and pod aliases. */
export interface ToolContext {
  dataset: Dataset;
  settings: ToolSettings;
  aliases: SpanAliases;
  pods: PodAliases;
}

export interface ToolDefinition<A = unknown> {
  name: string;
  description: string;
  /** Arguments schema; also rendered as the JSON Schema the model sees, unless `offered` is given. */
  args: z.ZodType<A>;
  /** The JSON Schema the model sees, where it leaves out arguments that `args` accepts. */
  offered?: z.ZodType;
  /** A successful call ends the episode (print_results). */
  terminal: boolean;
  /** Arguments in the episode path: per-episode span and pod aliases replaced by the span ids and pods they stand for. */
  canonical?(ctx: ToolContext, args: A): A;
  /** Components named by the arguments (for the episode path). */
  argComponents(ctx: ToolContext, args: A): string[];
  /** Must not throw on any valid arguments; the toolbox still guards it. */
  run(ctx: ToolContext, args: A): Observation;
}

const tools = new Map<string, ToolDefinition<never>>();

export function registerTool<A>(def: ToolDefinition<A>): void {
  if (tools.has(def.name)) throw new Error(`tool ${def.name} registered twice`);
  tools.set(def.name, def as unknown as ToolDefinition<never>);
}

export function getTool(name: string): ToolDefinition<unknown> | undefined {
  return tools.get(name) as ToolDefinition<unknown> | undefined;
}

export function toolNames(): string[] {
  return [...tools.keys()];
}

/** OpenAI-style function spec of a tool, as the chat template renders it. */
export function toolSpec(def: ToolDefinition<unknown>): ToolSpec {
  const { $schema: _ignored, ...parameters } = z.toJSONSchema(def.offered ?? def.args, { io: 'input' }) as Record<string, unknown>;
  return { name: def.name, description: def.description, parameters };
}

/** Components a name (service, pod or node) resolves to, with its related pods and nodes. */
export function resolveComponent(
  ctx: ToolContext,
  name: string,
): { level: 'service' | 'pod' | 'node'; name: string; related: string[] } | undefined {
  const r = ctx.dataset.topology.resolve(ctx.pods.resolve(name));
  if (!r) return undefined;
  const topo = ctx.dataset.topology;
  if (r.level === 'service' && r.service) {
    const pods = topo.pods.filter((p) => p.service === r.service);
    const nodes = pods.map((p) => p.node).filter((n): n is string => !!n);
    return { level: 'service', name: r.service, related: [...new Set([...pods.map((p) => p.pod), ...nodes])] };
  }
  if (r.level === 'pod' && r.pod) {
    const node = r.node ?? topo.pods.find((p) => p.pod === r.pod)?.node;
    return { level: 'pod', name: r.pod, related: node ? [node] : [] };
  }
  if (r.level === 'node' && r.node) return { level: 'node', name: r.node, related: [] };
  return undefined;
}

/** Error text for a name that is no known component, listing some that are. */
export function unknownComponentError(ctx: ToolContext, name: string): string {
  const services = ctx.dataset.topology.services;
  const list = services.slice(0, 50).join(', ');
  return `unknown service, pod or node "${name.slice(0, 80)}"; known services: ${list}${services.length > 50 ? ', ...' : ''}`;
}
