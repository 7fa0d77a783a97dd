/** Arguments shared by the tools that inspect one component around one time (metrics, logs). */
import { z } from 'zod';

export const componentAtTimeArgs = z.object({
  service_name: z.string().min(1).describe('Service, pod or node name'),
  timestamp: z
    .union([z.number(), z.string()])
    .describe('Time to inspect: Unix seconds, milliseconds, microseconds or nanoseconds, or ISO-8601'),
});
