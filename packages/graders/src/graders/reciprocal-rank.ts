/**
 * Reciprocal-rank grader, this project's own option beside ThinkFL's Eq. 8-11 (issue 26): the
 * per-request reciprocal rank of the root cause, the metric evaluation reports (MRR, ThinkFL
 * Eq. 13), as a reward. Eq. 9 (recall, r_max 10) scores ranks 1/2/3 as 1.0/0.9/0.8; MRR scores
 * them 1/0.5/0.33, so the reward differs most where the metric does: first place against the rest.
 */
import { rankOfTruth } from '@thinkfl/env';
import { matchContext, normalizeItem } from '../match';
import type { Grader } from '../types';

/** RR = 1/(r+1) for the 0-based rank r of the root cause; 0 when it is absent or there is no answer. */
export function reciprocalRankScore(rank: number | null): number {
  return rank === null ? 0 : 1 / (rank + 1);
}

export const reciprocalRank: Grader = {
  name: 'reciprocal_rank',
  description: 'Reciprocal rank 1/(r+1) of the root cause (service level by default), 0 when absent: per-request MRR as a reward',
  grade(episode, ctx) {
    const truth = { ...normalizeItem(ctx.truth), level: ctx.truth.level };
    const answer = episode.answer ? episode.answer.map(normalizeItem) : null;
    const mc = matchContext(ctx.podToService);
    const want = ctx.settings.reciprocal_rank.level;
    let rank = want === 'truth' ? undefined : rankOfTruth(answer, truth, want, mc);
    if (rank === undefined) rank = rankOfTruth(answer, truth, truth.level, mc);
    if (rank === undefined)
      throw new Error(`ground truth of question ${ctx.questionId} names no ${truth.level}: ${JSON.stringify(ctx.truth)}`);
    return { score: reciprocalRankScore(rank), parts: { found: rank === null ? 0 : 1, rank: rank ?? -1 } };
  },
};
