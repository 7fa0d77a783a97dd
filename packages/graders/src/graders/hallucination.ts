/** Hallucination grader, ThinkFL Eq. 11: answers never seen in tool results, and repeated answers. */
import type { EpisodeRecord } from '@thinkfl/env';
import { answerKey, matchContext, normalizeItem, normalizeName } from '../match';
import type { GradeContext, Grader } from '../types';
import type { HallucinationSettings } from '../grader-settings/hallucination';

export interface HallucinationCounts {
  total: number;
  invalid: number;
  duplicate: number;
}

/** Eq. 11: H = l1*N_inv/N_total + l2*N_dup/N_total; an empty or missing answer asserts nothing, so H = 0. */
export function hallucinationScore(c: HallucinationCounts, s: HallucinationSettings): number {
  if (c.total === 0) return 0;
  return (s.l1 * c.invalid) / c.total + (s.l2 * c.duplicate) / c.total;
}

/**
 * Names the tool results showed: every observation's components (the answer tool's own
 * echo excluded), plus the service of each pod shown.
 */
function seenNames(episode: EpisodeRecord, ctx: GradeContext): Set<string> {
  const mc = matchContext(ctx.podToService);
  const seen = new Set<string>();
  for (const call of episode.tool_calls) {
    if (call.name === ctx.settings.answer_tool) continue;
    for (const c of call.observation.components) {
      const n = normalizeName(c);
      if (!n) continue;
      seen.add(n);
      const service = mc.serviceOfPod(n);
      if (service) seen.add(service);
    }
  }
  return seen;
}

/**
 * N_inv: items naming a component (node, service or pod) that no tool result showed, or
 * naming none at all. N_dup: items repeating an earlier item (same component at the truth's level).
 */
export function hallucinationCounts(episode: EpisodeRecord, ctx: GradeContext): HallucinationCounts {
  const answer = episode.answer ?? [];
  const seen = seenNames(episode, ctx);
  const keys = new Set<string>();
  let invalid = 0;
  let duplicate = 0;
  for (const item of answer) {
    const named = Object.values(normalizeItem(item)).filter((v): v is string => v !== undefined);
    if (named.length === 0 || named.some((n) => !seen.has(n))) invalid++;
    const key = answerKey(item, ctx);
    if (keys.has(key)) duplicate++;
    keys.add(key);
  }
  return { total: answer.length, invalid, duplicate };
}

export const hallucination: Grader = {
  name: 'hallucination',
  description: 'ThinkFL Eq. 11: l1*N_inv/N_total + l2*N_dup/N_total (a penalty: higher is worse)',
  grade(episode, ctx) {
    const c = hallucinationCounts(episode, ctx);
    return { score: hallucinationScore(c, ctx.settings.hallucination), parts: { ...c } };
  },
};
