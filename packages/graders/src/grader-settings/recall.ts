/** Settings of the recall grader (graders/recall.ts); a leaf module, so the grader's types can name them without a circle. */
import { z } from 'zod';

export const recallSettings = z
  .object({
    /** r_max of Eq. 9: ranks (0-based) beyond it all score the floor 1/r_max. Default 10. */
    r_max: z
      .number()
      .int()
      .positive()
      .default(10)
      .describe('r_max of ThinkFL Eq. 9: ranks (0-based) beyond it all score the floor 1/r_max. Default 10 (ThinkFL Sec. 5.1.4).'),
    /** Score when the true root cause is absent from the answer or there is no answer. Default 0. */
    missing_score: z
      .number()
      .default(0)
      .describe('Score when the true root cause is absent from the answer or there is no answer (ThinkFL leaves it open). Default 0.'),
  })
  .strict();
export type RecallSettings = z.output<typeof recallSettings>;
