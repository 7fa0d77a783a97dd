/** Settings of the multi-factor grader (graders/multi-factor.ts); a leaf module, so the grader's types can name them without a circle. */
import { z } from 'zod';

export const multiFactorSettings = z
  .object({
    /** alpha of Eq. 8, weight of the recall score R (Eq. 9). Default 1. */
    alpha: z.number().default(1).describe('alpha of ThinkFL Eq. 8, weight of the recall score R (Eq. 9). Default 1 (ThinkFL Sec. 5.1.4).'),
    /** beta of Eq. 8, weight of the route score P (Eq. 10). Default 0.2. */
    beta: z
      .number()
      .default(0.2)
      .describe('beta of ThinkFL Eq. 8, weight of the route score P (Eq. 10). Default 0.2 (ThinkFL Sec. 5.1.4).'),
    /** gamma of Eq. 8, weight of the hallucination penalty H (Eq. 11). Default 0.2. */
    gamma: z
      .number()
      .default(0.2)
      .describe('gamma of ThinkFL Eq. 8, weight of the hallucination penalty H (Eq. 11). Default 0.2 (ThinkFL Sec. 5.1.4).'),
  })
  .strict();
export type MultiFactorSettings = z.output<typeof multiFactorSettings>;
