/** graders: every grader's settings (packages/graders) and the reward of each stage. */
import { COMPOSITE_PRESETS, compositeSpec, graderSettings, routeSettings } from '@thinkfl/graders';
import { z } from 'zod';

const reward = (preset: string, what: string) =>
  z
    .union([z.enum(Object.keys(COMPOSITE_PRESETS) as [string, ...string[]]), compositeSpec])
    .default(preset)
    .describe(
      `Reward of the stage: a preset name (${Object.keys(COMPOSITE_PRESETS).join(', ')}) or { terms: [{ grader, weight }] }. ` +
        `Default ${preset}: ${what}.`,
    );

export const GradersSection = graderSettings
  .extend({
    // The route score (Eq. 10) measures against the D_max the episodes are played with: episode.d_max, given once.
    route: routeSettings
      .prefault({})
      .describe('Route grader, ThinkFL Eq. 10: mu, the tolerance in tool steps (default 2). Its D_max is episode.d_max.'),
    stage_rewards: z
      .strictObject({
        priming: reward('stage1', 'recall + format'),
        exploration: reward('stage2', 'recall 1 + diversity 0.8, recall slightly above diversity (ThinkFL)'),
        refinement: reward('stage3', 'multi_factor, S = alpha*R + beta*P - gamma*H (ThinkFL Eq. 8)'),
      })
      .prefault({})
      .describe('The reward of each stage as a weighted sum of graders.'),
  })
  .describe(
    'Grader settings (packages/graders: recall.r_max of Eq. 9, route.mu of Eq. 10, multi_factor.alpha/beta/gamma ' +
      'of Eq. 8, diversity.a/b/c of Algorithm 2, hallucination, oracl) and the reward per stage.',
  );
