/** Recall grader, ThinkFL Eq. 9: a linear reward for how high the true root cause is ranked. */
import { truthRank } from '../match';
import type { Grader } from '../types';
import type { RecallSettings } from '../grader-settings/recall';

/**
 * Eq. 9: R = 1 - r/r_max for r <= r_max, 1/r_max for r > r_max (r 0-based). As written in
 * the paper, r = r_max scores 0 while r = r_max + 1 scores 1/r_max; kept verbatim.
 */
export function recallScore(rank: number | null, s: RecallSettings): number {
  if (rank === null) return s.missing_score;
  return rank <= s.r_max ? 1 - rank / s.r_max : 1 / s.r_max;
}

export const recall: Grader = {
  name: 'recall',
  description: 'ThinkFL Eq. 9: 1 - r/r_max for the rank r of the true root cause',
  grade(episode, ctx) {
    const rank = truthRank(episode.answer, ctx);
    return {
      score: recallScore(rank, ctx.settings.recall),
      parts: { found: rank === null ? 0 : 1, rank: rank ?? -1 },
    };
  },
};
