/**
 * ORACL's result rewards (../shared/seeds/002, Sec. V-C1):
 *   Eq. 5  S_pod    = POD_match / (POD_match + POD_not + eps)
 *   Eq. 6  F_beta   = (1+b^2)TP / ((1+b^2)TP + b^2 FN + FP + eps),  b > 1
 *   Eq. 7  R_base   = alpha S_pod + (1-alpha) F_beta + delta 1[TP > 0]
 *   Eq. 8  R_result = R_base - d max(0, FN - tau_fn)
 * Eq. 12 (KL to the old policy) is not a reward here: it is the loss's KL term, the only place
 * where it differs from 0 with one update per batch.
 */
import type { Grader } from '../types';
import type { OraclSettings } from './settings';
import { oraclSets, type OraclSets } from './pairs';

export function podScore(s: OraclSets, eps: number): number {
  return s.podMatch / (s.podMatch + s.podNot + eps);
}

export function fBeta(s: OraclSets, beta: number, eps: number): number {
  const b2 = beta * beta;
  return ((1 + b2) * s.truePositives) / ((1 + b2) * s.truePositives + b2 * s.falseNegatives + s.falsePositives + eps);
}

export function fnPenalty(s: OraclSets, o: OraclSettings): number {
  return o.fn_weight * Math.max(0, s.falseNegatives - o.fn_tolerance);
}

export function resultReward(s: OraclSets, o: OraclSettings): number {
  const base = o.alpha * podScore(s, o.epsilon) + (1 - o.alpha) * fBeta(s, o.beta, o.epsilon) + o.delta * (s.truePositives > 0 ? 1 : 0);
  return base - fnPenalty(s, o);
}

const parts = (s: OraclSets): Record<string, number> => ({
  podMatch: s.podMatch,
  podNot: s.podNot,
  truePositives: s.truePositives,
  falsePositives: s.falsePositives,
  falseNegatives: s.falseNegatives,
  typeKnown: s.typeKnown ? 1 : 0,
});

export const oraclPodMatch: Grader = {
  name: 'oracl_pod_match',
  description: 'ORACL Eq. 5: S_pod = POD_match / (POD_match + POD_not + eps), fault type ignored',
  grade(episode, ctx) {
    const s = oraclSets(episode, ctx);
    return { score: podScore(s, ctx.settings.oracl.epsilon), parts: parts(s) };
  },
};

export const oraclFBeta: Grader = {
  name: 'oracl_fbeta',
  description: 'ORACL Eq. 6: F_beta over (component, fault type) pairs, beta > 1',
  grade(episode, ctx) {
    const s = oraclSets(episode, ctx);
    return { score: fBeta(s, ctx.settings.oracl.beta, ctx.settings.oracl.epsilon), parts: parts(s) };
  },
};

export const oraclTpBonus: Grader = {
  name: 'oracl_tp_bonus',
  description: 'ORACL Eq. 7 bonus term: 1 when at least one (component, type) pair is right (weight it by delta)',
  grade(episode, ctx) {
    const s = oraclSets(episode, ctx);
    return { score: s.truePositives > 0 ? 1 : 0, parts: parts(s) };
  },
};

export const oraclFnPenalty: Grader = {
  name: 'oracl_fn_penalty',
  description: 'ORACL Eq. 8 penalty term: -d * max(0, FN - tau_fn)',
  grade(episode, ctx) {
    const s = oraclSets(episode, ctx);
    // Written as a difference so that no penalty scores +0, not -0.
    return { score: 0 - fnPenalty(s, ctx.settings.oracl), parts: parts(s) };
  },
};

export const oraclResult: Grader = {
  name: 'oracl_result',
  description: 'ORACL Eq. 7-8: alpha*S_pod + (1-alpha)*F_beta + delta*1[TP>0] - d*max(0, FN - tau_fn)',
  grade(episode, ctx) {
    const s = oraclSets(episode, ctx);
    return { score: resultReward(s, ctx.settings.oracl), parts: parts(s) };
  },
};
