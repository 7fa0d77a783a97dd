/** Settings of the reciprocal-rank grader (graders/reciprocal-rank.ts); a leaf module, so the grader's types can name them without a circle. */
import { z } from 'zod';

export const reciprocalRankSettings = z
  .object({
    /**
     * Level the root cause is ranked at: service (the figure evaluation leads with: two pods of
     * one service are one guess), pod, node, or truth (the truth's own level). A truth that
     * names no component at the level is ranked at its own level. Default service.
     */
    level: z
      .enum(['service', 'pod', 'node', 'truth'])
      .default('service')
      .describe(
        "Level the root cause is ranked at: service (the figure evaluation leads with: two pods of one service are one guess), pod, node, or truth (the truth's own level). A truth that names no component at the level is ranked at its own level. Default service.",
      ),
  })
  .strict();
export type ReciprocalRankSettings = z.output<typeof reciprocalRankSettings>;
