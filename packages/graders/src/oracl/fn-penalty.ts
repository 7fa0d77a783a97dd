/** ORACL false-negative penalty (Eq. 10): a fixed penalty (negative score) per true cause missed. */
import type { Grader } from '../types';
import { causeSets } from './sets';

export const oraclFnPenalty: Grader = {
  name: 'oracl_fn_penalty',
  description: 'ORACL Eq. 10: -fnPenalty per false negative',
  grade(episode, ctx) {
    const { falseNegatives } = causeSets(episode, ctx);
    // Written as a difference so that no miss scores +0, not -0.
    return { score: 0 - ctx.settings.oracl.fnPenalty * falseNegatives, parts: { falseNegatives } };
  },
};
