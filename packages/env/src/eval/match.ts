/**
 * Where the ground truth sits in a ranked answer, at one level. Shared by evaluation and by
 * the graders (env must not import graders, so the one definition lives here).
 */
import type { GroundTruth, Level, RootCause } from '../types';

/** What matching needs from the topology: the service a pod belongs to. */
export interface MatchContext {
  serviceOfPod(pod: string): string | undefined;
}

/** The component an answer item (or the truth) names at a level, or undefined when it names none. */
export function componentAt(item: RootCause, level: Level, ctx?: MatchContext): string | undefined {
  if (level === 'pod') return item.pod || undefined;
  if (level === 'node') return item.node || undefined;
  if (item.service) return item.service;
  return item.pod ? ctx?.serviceOfPod(item.pod) : undefined;
}

/** True when an answer item names the truth's component at this level. */
export function matchesTruth(item: RootCause, truth: GroundTruth, level: Level, ctx?: MatchContext): boolean {
  const want = componentAt(truth, level, ctx);
  return want !== undefined && componentAt(item, level, ctx) === want;
}

/**
 * 0-based rank of the truth in the answer at a level, counting distinct components: items
 * that name the same component at this level share one rank (two pods of one service are
 * one service guess), and items naming nothing at this level take no rank.
 * Returns null when the truth is absent, and undefined when the truth itself names no
 * component at this level (the level does not apply to this fault).
 */
export function rankOfTruth(answer: RootCause[] | null, truth: GroundTruth, level: Level, ctx?: MatchContext): number | null | undefined {
  const want = componentAt(truth, level, ctx);
  if (want === undefined) return undefined;
  const seen = new Set<string>();
  for (const item of answer ?? []) {
    const c = componentAt(item, level, ctx);
    if (c === undefined) continue;
    if (c === want) return seen.size;
    seen.add(c);
  }
  return null;
}

/** Fault type for comparison: lower-case, separators dropped ("CPU contention" = "cpu_contention"). */
export function normalizeFaultType(t: unknown): string {
  return typeof t === 'string'
    ? t
        .trim()
        .toLowerCase()
        .replace(/[^a-z0-9]/g, '')
    : '';
}

/**
 * KnowledgeMind's FT@k as a rank: when the answer's first component at the level is the truth's
 * (FL@1), the 0-based place of the true fault type among the distinct types the answer gives
 * for that component, in order; null when the component is wrong or the type is not given.
 */
export function faultTypeRank(
  answer: RootCause[] | null,
  truth: GroundTruth,
  type: string,
  level: Level,
  ctx?: MatchContext,
): number | null {
  if (rankOfTruth(answer, truth, level, ctx) !== 0) return null;
  const want = componentAt(truth, level, ctx);
  const types: string[] = [];
  for (const item of answer ?? []) {
    if (componentAt(item, level, ctx) !== want) continue;
    const t = normalizeFaultType(item.type);
    if (t && !types.includes(t)) types.push(t);
  }
  const i = types.indexOf(normalizeFaultType(type));
  return i < 0 ? null : i;
}
