/** Multi-factor grader, ThinkFL Eq. 8: S = alpha*R + beta*P - gamma*H, the stage-3 reward. */
import { z } from 'zod';
import { truthRank } from '../match';
import type { Grader } from '../types';
import { hallucinationCounts, hallucinationScore } from './hallucination';
import { recallScore } from './recall';
import { lastTruthStep, routeScore } from './route';

export const multiFactorSettings = z
  .object({
    /** alpha of Eq. 8, weight of the recall score R (Eq. 9). Default 1. */
    alpha: z.number().default(1),
    /** beta of Eq. 8, weight of the route score P (Eq. 10). Default 0.2. */
    beta: z.number().default(0.2),
    /** gamma of Eq. 8, weight of the hallucination penalty H (Eq. 11). Default 0.2. */
    gamma: z.number().default(0.2),
  })
  .strict();
export type MultiFactorSettings = z.output<typeof multiFactorSettings>;

export const multiFactor: Grader = {
  name: 'multi_factor',
  description: 'ThinkFL Eq. 8: alpha*R + beta*P - gamma*H, with R, P, H from their own settings',
  grade(episode, ctx) {
    const s = ctx.settings;
    const R = recallScore(truthRank(episode.answer, ctx), s.recall);
    const P = routeScore(episode.path.length, lastTruthStep(episode, ctx), s.route);
    const H = hallucinationScore(hallucinationCounts(episode, ctx), s.hallucination);
    const { alpha, beta, gamma } = s.multiFactor;
    return { score: alpha * R + beta * P - gamma * H, parts: { R, P, H } };
  },
};
