/** Settings of the route grader (graders/route.ts); a leaf module, so the grader's types can name them without a circle. */
import { z } from 'zod';

export const routeSettings = z
  .object({
    /** Tolerance mu of Eq. 10, in tool steps: the last mu steps may come after the root cause. Default 2. */
    mu: z
      .number()
      .int()
      .nonnegative()
      .default(2)
      .describe(
        'Tolerance mu of ThinkFL Eq. 10, in tool steps: the last mu steps may come after the root cause. The paper gives no value. Default 2.',
      ),
  })
  .strict();
export type RouteSettings = z.output<typeof routeSettings>;
