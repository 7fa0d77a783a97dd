/** graders: every grader's settings (packages/graders) and the reward of each stage. */
import { COMPOSITE_PRESETS, compositeSpec, graderSettings } from '@thinkfl/graders';
import { z } from 'zod';

const reward = (preset: string, what: string) =>
  z
    .union([
      z.enum(Object.keys(COMPOSITE_PRESETS) as [string, ...string[]]),
      compositeSpec,
    ])
    .default(preset)
    .describe(
      `Reward of the stage: a preset name (${Object.keys(COMPOSITE_PRESETS).join(', ')}) or { terms: [{ grader, weight }] }. ` +
        `Default ${preset}: ${what}.`,
    );

export const GradersSection = graderSettings
  .extend({
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
    'Grader settings (packages/graders; camelCase keys as that package defines them: recall.rMax is r_max, ' +
      'multiFactor.alpha/beta/gamma) and the reward per stage.',
  );
