/** The expert's assistant messages: one reasoning sentence and a Hermes tool call. */
import type { AssistantMessage } from '../../types';
import type { SpanSummary } from '../../tools';

export function hermes(reasoning: string, name: string, args: Record<string, unknown>): AssistantMessage {
  return { content: `${reasoning}\n<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call>` };
}

export const ms = (us: number): string => `${(us / 1000).toFixed(1)} ms`;

export function vsUsual(s: SpanSummary): string {
  if (s.usual_mean_us === undefined) return `took ${ms(s.duration_us)}`;
  return `took ${ms(s.duration_us)} against a usual ${ms(s.usual_mean_us)} (x${(s.ratio ?? 0).toFixed(2)})`;
}

export const spanName = (s: SpanSummary): string => `${s.service} "${s.operation}"`;
