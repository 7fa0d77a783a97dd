/** Multi-factor grader, ThinkFL Eq. 8: S = alpha*R + beta*P - gamma*H, the stage-3 reward. */
import { truthRank } from '../match';
import type { Grader } from '../types';
import { hallucinationCounts, hallucinationScore } from './hallucination';
import { recallScore } from './recall';
import { lastTruthStep, routeScore } from './route';

export const multiFactor: Grader = {
  name: 'multi_factor',
  description: 'ThinkFL Eq. 8: alpha*R + beta*P - gamma*H, with R, P, H from their own settings',
  grade(episode, ctx) {
    const s = ctx.settings;
    const R = recallScore(truthRank(episode.answer, ctx), s.recall);
    const P = routeScore(episode.path.length, lastTruthStep(episode, ctx), s.route, ctx.d_max);
    const H = hallucinationScore(hallucinationCounts(episode, ctx), s.hallucination);
    const { alpha, beta, gamma } = s.multi_factor;
    return { score: alpha * R + beta * P - gamma * H, parts: { R, P, H } };
  },
};
