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
export function rankOfTruth(
  answer: RootCause[] | null,
  truth: GroundTruth,
  level: Level,
  ctx?: MatchContext,
): number | null | undefined {
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
