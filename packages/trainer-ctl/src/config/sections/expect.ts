/** run.expect: thresholds a finished run must meet (the CI gate, docs/ci.md). */
import { z } from 'zod';

export const EXPECT_REDUCERS = ['last', 'first', 'min', 'max', 'mean'] as const;

export const ExpectationSchema = z
  .strictObject({
    name: z
      .string()
      .min(1)
      .optional()
      .describe(
        'Name in the run\'s output and in junit.xml. Default: the check written out, e.g. "eval/priming/format_valid last >= 0.75".',
      ),
    metric: z
      .string()
      .min(1)
      .describe(
        'Scalar series (the TensorBoard tag): a GRPO metrics field as <stage>/<path> (priming/reward/mean, ' +
          'exploration/graders/diversity/mean, refinement/train/kl), an SFT field as sft/<path> (sft/train/loss), or an ' +
          'evaluation figure as eval/<sft|stage>/<field> (eval/priming/format_valid, eval/refinement/per_fault_vote/service/mrr, ' +
          'eval/sft/per_request/service/R@1). Required; a series the run did not write fails the expectation. An older ' +
          'camelCase name (eval/priming/formatValid) is read as its snake_case one, with a warning.',
      ),
    of: z
      .enum(EXPECT_REDUCERS)
      .default('last')
      .describe('How the series is reduced before min/max are applied: last, first, min, max or mean of its values. Default last.'),
    min: z.number().optional().describe('The reduced value must be at least this (a NaN never is). Default: no lower bound.'),
    max: z.number().optional().describe('The reduced value must be at most this (a NaN never is). Default: no upper bound.'),
    trend: z
      .enum(['rising', 'falling'])
      .optional()
      .describe(
        'The mean of the second half of the series must be above (rising) or below (falling) the mean of its first half ' +
          '(an odd middle value counts in neither); needs 2 or more values. Default: no trend check.',
      ),
    finite: z
      .boolean()
      .default(false)
      .describe('Every value of the series must be finite (no NaN or infinity, e.g. a diverged loss). Default false.'),
  })
  .refine((e) => e.min !== undefined || e.max !== undefined || e.trend !== undefined || e.finite, {
    message: 'an expectation needs at least one of min, max, trend or finite: true',
  })
  .describe('One threshold on one scalar series of the run.');

export type Expectation = z.output<typeof ExpectationSchema>;
