/** ORACL pod match (Eq. 5): 1 when the predicted set is exactly the true set, else 0. */
import type { Grader } from '../types';
import { causeSets } from './sets';

export const oraclPodMatch: Grader = {
  name: 'oracl_pod_match',
  description: 'ORACL Eq. 5: 1 when the predicted causes are exactly the true ones',
  grade(episode, ctx) {
    const s = causeSets(episode, ctx);
    return { score: s.falsePositives === 0 && s.falseNegatives === 0 ? 1 : 0, parts: { ...s } };
  },
};
