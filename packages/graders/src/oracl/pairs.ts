/**
 * The sets ORACL's rewards compare (Eq. 5-8). Components are taken at the truth's level
 * (pods for Nezha); the truth here is one fault: one component and its fault type.
 * - Pods (Eq. 5, type ignored): POD_match = predicted components equal to the true one,
 *   POD_not = the other distinct predicted components.
 * - Pairs (Eq. 6-8): (component, fault type); TP = the true pair predicted, FP = other distinct
 *   predicted pairs, FN = true pairs not predicted. Without a known true type (the context
 *   carries none) a pair matches on its component alone, and `typeKnown` says so.
 */
import { componentAt, normalizeFaultType, type EpisodeRecord } from '@thinkfl/env';
import { matchContext, normalizeItem } from '../match';
import type { GradeContext } from '../types';

export interface OraclSets {
  podMatch: number;
  podNot: number;
  truePositives: number;
  falsePositives: number;
  falseNegatives: number;
  typeKnown: boolean;
}

export function oraclSets(episode: EpisodeRecord, ctx: GradeContext): OraclSets {
  const mc = matchContext(ctx.podToService);
  const level = ctx.truth.level;
  const want = componentAt(normalizeItem(ctx.truth), level, mc);
  if (want === undefined) throw new Error(`ground truth of question ${ctx.questionId} names no ${level}`);
  const wantType = ctx.faultType === undefined ? undefined : normalizeFaultType(ctx.faultType);
  const pods = new Set<string>();
  const pairs = new Set<string>();
  let tp = false;
  for (const item of episode.answer ?? []) {
    const c = componentAt(normalizeItem(item), level, mc);
    if (c === undefined) continue;
    pods.add(c);
    const type = normalizeFaultType((item as { type?: unknown }).type);
    pairs.add(`${c}|${type}`);
    if (c === want && (wantType === undefined || type === wantType)) tp = true;
  }
  const podMatch = pods.has(want) ? 1 : 0;
  const truePositives = tp ? 1 : 0;
  return {
    podMatch,
    podNot: pods.size - podMatch,
    truePositives,
    falsePositives: pairs.size - truePositives,
    falseNegatives: 1 - truePositives,
    typeKnown: wantType !== undefined,
  };
}
