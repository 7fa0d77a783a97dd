/** Route grader, ThinkFL Eq. 10: does the reasoning path lead to the root cause, and how late. */
import type { EpisodeRecord } from '@thinkfl/env';
import { namesTruth } from '../match';
import type { GradeContext, Grader } from '../types';
import type { RouteSettings } from '../grader-settings/route';

/**
 * Eq. 10 from L (tool steps), r' (1-based step where the root cause last appears, null when it
 * never does) and D_max (the episode's, GradeContext.d_max): P = min(r'/(L - mu), 1) if it
 * appears, else min(L/D_max, 1).
 * Undefined edge L - mu <= 0: every step lies within the tolerance, so P = 1.
 */
export function routeScore(steps: number, lastStep: number | null, s: RouteSettings, dMax: number): number {
  if (lastStep === null) return Math.min(steps / dMax, 1);
  const span = steps - s.mu;
  return span <= 0 ? 1 : Math.min(lastStep / span, 1);
}

/** 1-based index of the last path step naming the true root cause, or null. */
export function lastTruthStep(episode: EpisodeRecord, ctx: GradeContext): number | null {
  for (let i = episode.path.length - 1; i >= 0; i--) {
    if (episode.path[i].components.some((c) => namesTruth(c, ctx))) return i + 1;
  }
  return null;
}

export const route: Grader = {
  name: 'route',
  description: "ThinkFL Eq. 10: min(r'/(L - mu), 1) if the path reaches the root cause, else min(L/D_max, 1)",
  grade(episode, ctx) {
    const last = lastTruthStep(episode, ctx);
    const steps = episode.path.length;
    return {
      score: routeScore(steps, last, ctx.settings.route, ctx.d_max),
      parts: { steps, lastStep: last ?? 0, found: last === null ? 0 : 1 },
    };
  },
};
