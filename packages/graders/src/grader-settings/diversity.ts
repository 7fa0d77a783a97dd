/** Settings of the diversity grader (graders/diversity.ts); a leaf module, so the grader's types can name them without a circle. */
import { z } from 'zod';

export const diversitySettings = z
  .object({
    /** A of Algorithm 2: a new path whose answer ranks the true root cause first. Default 1. */
    a: z
      .number()
      .default(1)
      .describe(
        'A of ThinkFL Algorithm 2: score of a new path whose answer ranks the true root cause first (the paper: A >> B > C, no values). Default 1.',
      ),
    /** B of Algorithm 2: a new path whose answer does not. Default 0.3. */
    b: z.number().default(0.3).describe('B of ThinkFL Algorithm 2: score of a new path whose answer does not. Default 0.3.'),
    /** C of Algorithm 2: a path already seen for this question. Default 0. */
    c: z.number().default(0).describe('C of ThinkFL Algorithm 2: score of a path already seen for this question. Default 0.'),
  })
  .strict()
  .refine((s) => s.a > s.b && s.b > s.c, { message: 'Algorithm 2 needs a > b > c' });
export type DiversitySettings = z.output<typeof diversitySettings>;
