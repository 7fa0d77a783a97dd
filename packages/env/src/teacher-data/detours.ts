/**
 * Detours for teacher conversations: a wrapper that now and then replaces the expert's call
 * with a mistake a small model makes (an unknown span, broken JSON, a tool that is not
 * offered) or a side trip into another span, so that the conversation shows the error
 * observation and the expert's recovery. The detour turns are not trained on; the
 * recovery after them is (notes/tiny-model.md: valid final answers rose from 31% to 53-80%).
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
  /** Turns whose message is a detour (not trained on). */
  readonly detourTurns: number[] = [];
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
    const kind = s.kinds[Math.floor(this.rng.next() * s.kinds.length)];
    const detour = this.detour(kind, ctx, msg);
    if (!detour) return msg;
    this.detourTurns.push(ctx.turn);
    return detour;
  }

  private detour(kind: DetourKind, ctx: PolicyContext, msg: AssistantMessage): AssistantMessage | undefined {
    const found = CALL.exec(msg.content);
    if (!found) return undefined;
    const reasoning = msg.content.slice(0, found.index).trimEnd();
    const { seen, opened } = aliases(ctx);
    if (kind === 'broken_json') return { content: msg.content.slice(0, found.index + Math.floor(found[0].length * 0.6)) };
    if (kind === 'unoffered_tool') {
      const parsed = JSON.parse(found[1]) as { name: string; arguments: Record<string, unknown> };
      return call(reasoning, `${parsed.name.replace(/s$/, '')}_v2`, parsed.arguments);
    }
    const unopened = seen.filter((a) => !opened.has(a));
    if (kind === 'side_span' && unopened.length > 0) {
      const ref = unopened[Math.floor(this.rng.next() * unopened.length)];
      return call(`I also look below ${ref}.`, 'search_traces', { parent_span_id: ref });
    }
    const top = Math.max(0, ...seen.map((a) => Number(a.slice(1))));
    return call(reasoning, 'search_traces', { parent_span_id: `s${top + 1 + Math.floor(this.rng.next() * 5)}` });
  }
}
