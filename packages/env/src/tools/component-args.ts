/** Arguments shared by the tools that inspect one component around one time (metrics, logs). */
import { z } from 'zod';
import { resolveComponent, type ToolContext } from './registry';

export const componentAtTimeArgs = z.object({
  service_name: z.string().min(1).describe('Service, pod or node name'),
  timestamp: z
    .union([z.number(), z.string()])
    .describe('Time to inspect: Unix seconds, milliseconds, microseconds or nanoseconds, or ISO-8601'),
});

/**
 * Such a call's arguments in canonical form (the episode path, which the diversity grader keys on):
 * a pod alias (tool_settings.pod_aliases) replaced by the pod it stands for, as span aliases are.
 */
export function componentAtTimeCanonical(ctx: ToolContext, a: z.output<typeof componentAtTimeArgs>): z.output<typeof componentAtTimeArgs> {
  return ctx.pods.enabled ? { ...a, service_name: ctx.pods.resolve(a.service_name) } : a;
}

/** The component such a call names (a tool's argComponents): the resolved name, none when it is unknown. */
export function componentAtTimeNames(ctx: ToolContext, a: z.output<typeof componentAtTimeArgs>): string[] {
  const r = resolveComponent(ctx, a.service_name);
  return r ? [r.name] : [];
}
