/** Settings of the hallucination grader (graders/hallucination.ts); a leaf module, so the grader's types can name them without a circle. */
import { z } from 'zod';

export const hallucinationSettings = z
  .object({
    /** lambda_1 of Eq. 11, weight of the share of answers found in no tool result. Default 0.5. */
    l1: z
      .number()
      .nonnegative()
      .default(0.5)
      .describe(
        'lambda_1 of ThinkFL Eq. 11, weight of the share of answers found in no tool result. The paper gives no value. Default 0.5.',
      ),
    /** lambda_2 of Eq. 11, weight of the share of repeated answers. Default 0.5. */
    l2: z
      .number()
      .nonnegative()
      .default(0.5)
      .describe('lambda_2 of ThinkFL Eq. 11, weight of the share of repeated answers. The paper gives no value. Default 0.5.'),
  })
  .strict();
export type HallucinationSettings = z.output<typeof hallucinationSettings>;
