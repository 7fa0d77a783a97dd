/**
 * A fault's rank by majority vote over its requests (RCLAgent Eq. 10):
 * R̂ = argmax_r Σ_i 1(r_i = r), where r_i is request i's top-1 component at a level. The
 * components are ordered by their vote count, ties broken by first occurrence in request
 * order; the fault's vote rank is the truth's 0-based position in that order (null when no
 * request put the truth first). Unlike the best rank, one lucky request does not make a fault
 * found: this is the per-fault figure RCLAgent's Table III reports.
 */
import type { GroundTruth, Level, RootCause } from '../types';
import { componentAt, type MatchContext } from './match';

/** The component a ranked answer puts first at a level (items naming nothing at it are skipped). */
export function topComponent(answer: RootCause[] | null, level: Level, ctx?: MatchContext): string | undefined {
  for (const item of answer ?? []) {
    const c = componentAt(item, level, ctx);
    if (c !== undefined) return c;
  }
  return undefined;
}

/** Components by votes (each answer's top-1 at the level), most votes first, ties in first-seen order. */
export function voteOrder(answers: (RootCause[] | null)[], level: Level, ctx?: MatchContext): { component: string; votes: number }[] {
  const votes = new Map<string, number>();
  for (const a of answers) {
    const top = topComponent(a, level, ctx);
    if (top !== undefined) votes.set(top, (votes.get(top) ?? 0) + 1);
  }
  // Map keeps insertion order and Array.prototype.sort is stable: equal counts stay first-seen first.
  return [...votes].map(([component, n]) => ({ component, votes: n })).sort((a, b) => b.votes - a.votes);
}

/**
 * 0-based rank of the truth in the vote order, null when it got no vote, undefined when the
 * truth names no component at this level.
 */
export function voteRank(answers: (RootCause[] | null)[], truth: GroundTruth, level: Level, ctx?: MatchContext): number | null | undefined {
  const want = componentAt(truth, level, ctx);
  if (want === undefined) return undefined;
  const i = voteOrder(answers, level, ctx).findIndex((v) => v.component === want);
  return i < 0 ? null : i;
}
