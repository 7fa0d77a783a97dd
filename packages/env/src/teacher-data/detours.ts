/**
 * Detours for teacher conversations: a wrapper that now and then replaces the expert's call
 * with a mistake a small model makes (an unknown span, broken JSON, a tool that is not
 * offered) or a side trip into another span, so that the conversation shows the error
 * observation and the expert's recovery. The detour turns are not trained on; the
 * recovery after them is (notes/tiny-model.md: valid final answers rose from 31% to 53-80%).
 * A side trip is a valid move, not a mistake: with `trained_kinds: [side_span]` it is trained
 * on too, so that the SFT policy opens other spans than the expert's now and then (a walk
 * GRPO can sample; issue 26, docs/experiments.md "Headroom of the SFT checkpoint").
 */
import { z } from 'zod';
import { Rng } from '../rng';
import type { AssistantMessage, Policy, PolicyContext, ToolSpec } from '../types';

export const DETOUR_KINDS = ['unknown_span', 'broken_json', 'unoffered_tool', 'side_span'] as const;
export type DetourKind = (typeof DETOUR_KINDS)[number];

export const DetourSettingsSchema = z
  .object({
    /** Chance that an exploration turn after the first becomes a detour. 0 turns detours off. Default 0.25. */
    rate: z
      .number()
      .min(0)
      .max(1)
      .default(0.25)
      .describe(
        'Chance that an exploration turn after the first becomes a detour. 0 turns detours off. Default 0.25 (in a run config, 0 while stages.priming.sft.detours is left out).',
      ),
    /** Most detours in one conversation. Default 2. */
    max_per_episode: z.number().int().min(0).default(2).describe('Most detours in one conversation. Default 2.'),
    /** Kinds drawn from, uniformly. Default all. */
    kinds: z
      .array(z.enum(DETOUR_KINDS))
      .min(1)
      .default([...DETOUR_KINDS])
      .describe(
        'Detour kinds drawn from, uniformly: unknown_span (a span alias never shown), broken_json (a call cut off mid-JSON), unoffered_tool (a tool name that is not offered), side_span (a side trip into a span seen but not opened). Default all.',
      ),
    /** Kinds whose detour turns are trained on like the expert's own. Default none. */
    trained_kinds: z
      .array(z.enum(DETOUR_KINDS))
      .default([])
      .describe(
        "Kinds whose detour turns are trained on like the expert's own turns, e.g. [side_span]: the SFT policy then opens another span than the expert's now and then, a walk that GRPO can sample (issue 26). Default none: every detour is context only.",
      ),
  })
  .strict();
export type DetourSettings = z.output<typeof DetourSettingsSchema>;
export type DetourSettingsInput = z.input<typeof DetourSettingsSchema>;

const CALL = /<tool_call>\n([\s\S]*)\n<\/tool_call>/;

function call(text: string, name: string, args: Record<string, unknown>): AssistantMessage {
  return { content: `${text ? `${text}\n` : ''}<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call>` };
}

function isAnswer(msg: AssistantMessage): boolean {
  const found = CALL.exec(msg.content);
  return !!found && /^\{"name":\s*"print_results"/.test(found[1]);
}

/** Span aliases (s1, s2, ...) shown in tool results so far, and those already opened. */
function aliases(ctx: PolicyContext): { seen: string[]; opened: Set<string> } {
  const seen = new Set<string>();
  for (const m of ctx.messages) {
    if (m.role === 'tool' || m.role === 'user') for (const a of m.content.matchAll(/\bs\d+\b/g)) seen.add(a[0]);
  }
  const opened = new Set<string>();
  for (const c of ctx.toolCalls) {
    const ref = (c.arguments as { parent_span_id?: unknown }).parent_span_id;
    if (c.name === 'search_traces' && typeof ref === 'string') opened.add(ref);
  }
  return { seen: [...seen], opened };
}

export class DetourPolicy implements Policy {
  readonly name: string;
  /** Turns whose message is a detour. */
  readonly detourTurns: number[] = [];
  /** Detour turns that are not trained on (those of kinds outside trained_kinds). */
  readonly untrainedTurns: number[] = [];
  /** Tools offered on the first turn: what a chat template renders into the prompt. */
  firstTools: ToolSpec[] = [];
  private readonly rng: Rng;

  constructor(
    private readonly inner: Policy,
    private readonly settings: DetourSettings,
    seed: number,
  ) {
    this.name = `${inner.name}+detours`;
    this.rng = new Rng(seed);
  }

  async next(ctx: PolicyContext): Promise<AssistantMessage> {
    if (ctx.turn === 0) this.firstTools = ctx.tools;
    const msg = await this.inner.next(ctx);
    const s = this.settings;
    // The answer is never a detour: a detour there would leave the teacher no turn to answer on its own.
    if (ctx.final || ctx.turn === 0 || isAnswer(msg) || this.detourTurns.length >= s.max_per_episode || this.rng.next() >= s.rate)
      return msg;
    const detour = this.detour(s.kinds[Math.floor(this.rng.next() * s.kinds.length)], ctx, msg);
    if (!detour) return msg;
    this.detourTurns.push(ctx.turn);
    if (!s.trained_kinds.includes(detour.kind)) this.untrainedTurns.push(ctx.turn);
    return detour.message;
  }

  /** The detour of `kind`, and the kind it became (a side trip with no unopened span seen is an unknown span). */
  private detour(kind: DetourKind, ctx: PolicyContext, msg: AssistantMessage): { message: AssistantMessage; kind: DetourKind } | undefined {
    const found = CALL.exec(msg.content);
    if (!found) return undefined;
    const reasoning = msg.content.slice(0, found.index).trimEnd();
    const { seen, opened } = aliases(ctx);
    if (kind === 'broken_json')
      return { kind, message: { content: msg.content.slice(0, found.index + Math.floor(found[0].length * 0.6)) } };
    if (kind === 'unoffered_tool') {
      const parsed = JSON.parse(found[1]) as { name: string; arguments: Record<string, unknown> };
      return { kind, message: call(reasoning, `${parsed.name.replace(/s$/, '')}_v2`, parsed.arguments) };
    }
    const unopened = seen.filter((a) => !opened.has(a));
    if (kind === 'side_span' && unopened.length > 0) {
      const ref = unopened[Math.floor(this.rng.next() * unopened.length)];
      // A trained side trip is worded as the expert's turns are: no free text where they have none.
      const text = this.settings.trained_kinds.includes(kind) && !reasoning ? '' : `I also look below ${ref}.`;
      return { kind, message: call(text, 'search_traces', { parent_span_id: ref }) };
    }
    const top = Math.max(0, ...seen.map((a) => Number(a.slice(1))));
    return {
      kind: 'unknown_span',
      message: call(reasoning, 'search_traces', { parent_span_id: `s${top + 1 + Math.floor(this.rng.next() * 5)}` }),
    };
  }
}
