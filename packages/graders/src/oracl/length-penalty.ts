/**
 * ORACL length penalty (Eq. 11), on correct answers only so that a wrong answer is never
 * pushed to explore less: it grows linearly from 0 at targetChars to lengthPenalty at maxChars
 * of assistant text (the graders see no tokens, so characters stand in for them).
 */
import type { EpisodeRecord } from '@thinkfl/env';
import type { Grader } from '../types';
import { causeSets } from './sets';

/** Characters the policy wrote: assistant contents plus native tool-call arguments. */
export function assistantChars(episode: EpisodeRecord): number {
  let n = 0;
  for (const m of episode.messages) {
    if (m.role !== 'assistant') continue;
    // OpenAI-style assistant messages may carry null content beside their tool calls.
    n += (m.content ?? '').length;
    for (const c of m.tool_calls ?? []) n += c.function.arguments.length;
  }
  return n;
}

export const oraclLength: Grader = {
  name: 'oracl_length',
  description: 'ORACL Eq. 11: -lengthPenalty * clamp((chars - targetChars)/(maxChars - targetChars)) on correct answers',
  grade(episode, ctx) {
    const { lengthPenalty, targetChars, maxChars } = ctx.settings.oracl;
    const chars = assistantChars(episode);
    const correct = causeSets(episode, ctx).truePositives > 0;
    const excess = Math.min(1, Math.max(0, (chars - targetChars) / (maxChars - targetChars)));
    return { score: correct ? 0 - lengthPenalty * excess : 0, parts: { chars, correct: correct ? 1 : 0 } };
  },
};
