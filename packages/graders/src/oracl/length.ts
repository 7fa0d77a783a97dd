/**
 * ORACL length constraint (Eq. 10-11): s(L) = 0 for L <= L_min, -(L - L_min)/(L_max - L_min)
 * in between, -1 for L >= L_max; R_length = correct * s(L). L is the length of one generation
 * (the final one), in characters since graders see no tokens; "correct" (undefined in the paper)
 * is a right (component, type) pair, the TP of Eq. 6.
 */
import type { Grader } from '../types';
import { finalGeneration } from './format';
import { oraclSets } from './pairs';

export function lengthScore(chars: number, min: number, max: number): number {
  if (chars <= min) return 0;
  if (chars >= max) return -1;
  return -(chars - min) / (max - min);
}

export const oraclLength: Grader = {
  name: 'oracl_length',
  description: 'ORACL Eq. 10-11: correct * s(L), s linear from 0 at L_min to -1 at L_max (characters of the final generation)',
  grade(episode, ctx) {
    const { length_min, length_max } = ctx.settings.oracl;
    const chars = finalGeneration(episode).length;
    const correct = oraclSets(episode, ctx).truePositives > 0 ? 1 : 0;
    // A difference from 0 so that no penalty scores +0, not -0.
    return { score: correct ? 0 + lengthScore(chars, length_min, length_max) : 0, parts: { chars, correct } };
  },
};
