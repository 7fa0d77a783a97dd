/** ORACL F-beta (Eq. 6-8): precision and recall of the predicted causes, combined. */
import type { Grader } from '../types';
import { causeSets, type CauseSets } from './sets';

/** F_beta = (1+b^2)PR/(b^2 P + R); 0 when nothing true was predicted (also covers an empty prediction). */
export function fBeta(s: CauseSets, beta: number): { precision: number; recall: number; f: number } {
  if (s.truePositives === 0) return { precision: 0, recall: 0, f: 0 };
  const precision = s.truePositives / (s.truePositives + s.falsePositives);
  const recall = s.truePositives / (s.truePositives + s.falseNegatives);
  const b2 = beta * beta;
  return { precision, recall, f: ((1 + b2) * precision * recall) / (b2 * precision + recall) };
}

export const oraclFBeta: Grader = {
  name: 'oracl_fbeta',
  description: 'ORACL Eq. 6-8: F-beta of the predicted causes against the true ones',
  grade(episode, ctx) {
    const { precision, recall, f } = fBeta(causeSets(episode, ctx), ctx.settings.oracl.beta);
    return { score: f, parts: { precision, recall } };
  },
};
