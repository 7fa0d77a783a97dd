/**
 * `knowledgemind-script`: a scripted stand-in for KnowledgeMind's LLM roles on the
 * `knowledgemind` protocol, reported as "knowledgemind-scripted" (../shared/notes/seed-systems.md
 * 3.3c). It reads only the environment's requests (PolicyContext.environment):
 * - verifier: 2 per metric alarm + 2 per error template + 1 per warning template + 3 when metric
 *   and log alarms come together (+ trace_weight per abnormal span), rescaled to 1..8 with the
 *   top leading by at least 2 (the appendix prompt's scale);
 * - simulation: S = 1 + (callers' alarms) / simulation_scale, at most 10;
 * - answer (service-pod agent and summary): the path's end, as its pod when one pod carries the
 *   alarms, else the service; top-3 fault types by the count of evidence of each kind.
 */
import { z } from 'zod';
import type { KmCandidate, KmRequest } from '../episodes/knowledgemind/protocol';
import type { AssistantMessage, Policy, PolicyContext, RootCause } from '../types';
import { hermes } from './expert/messages';
import { registerPolicy } from './registry';

export const KnowledgeMindScriptSettingsSchema = z.object({
  /** Verifier weight per abnormal span of the candidate in the request (the trace agent). Default 1. */
  trace_weight: z.number().nonnegative().default(1),
  /** Callers' alarms per simulation score point. Default 2. */
  simulation_scale: z.number().positive().default(2),
  /** Type named for CPU metric alarms. Default cpu_contention (Nezha's label). */
  type_cpu: z.string().min(1).default('cpu_contention'),
  /** Type named for memory metric alarms. Default memory_contention. */
  type_memory: z.string().min(1).default('memory_contention'),
  /** Type named for error log alarms. Default exception (Nezha's label). */
  type_error: z.string().min(1).default('exception'),
  /** Type named for changed call patterns. Default return (Nezha's label). */
  type_pattern: z.string().min(1).default('return'),
  /** Type named for other metric or span alarms. Default network_delay. */
  type_delay: z.string().min(1).default('network_delay'),
});
export type KnowledgeMindScriptSettings = z.infer<typeof KnowledgeMindScriptSettingsSchema>;

export function verifierRaw(c: KmCandidate, s: KnowledgeMindScriptSettings): number {
  const logs = c.errorLogs + c.warnLogs;
  return 2 * c.metrics.length + 2 * c.errorLogs + c.warnLogs + (c.metrics.length > 0 && logs > 0 ? 3 : 0) + s.trace_weight * c.trace;
}

/** Raw scores to 1..8: linear from the lowest (1) to the highest (8); the others at most 6 when one leads. */
export function rescale(raw: number[]): number[] {
  const max = Math.max(...raw);
  const min = Math.min(...raw);
  if (max === min) return raw.map(() => 1);
  const scaled = raw.map((r) => 1 + Math.round((7 * (r - min)) / (max - min)));
  const leaders = raw.filter((r) => r === max).length;
  return leaders === 1 ? scaled.map((x, i) => (raw[i] === max ? 8 : Math.min(x, 6))) : scaled;
}

function types(c: KmCandidate, s: KnowledgeMindScriptSettings): string[] {
  const cpu = c.metrics.filter((m) => /cpu/i.test(m)).length;
  const mem = c.metrics.filter((m) => /mem/i.test(m)).length;
  const counts: [string, number][] = [
    [s.type_cpu, cpu],
    [s.type_memory, mem],
    [s.type_error, c.errorLogs],
    [s.type_pattern, c.patternChanges],
    [s.type_delay, c.metrics.length - cpu - mem + Math.max(0, c.trace - c.patternChanges)],
  ];
  // Stable sort: at equal counts the order above decides.
  return counts
    .sort((a, b) => b[1] - a[1])
    .slice(0, 3)
    .map(([t]) => t);
}

export function createKnowledgeMindScript(settings: KnowledgeMindScriptSettings): Policy {
  return {
    name: 'knowledgemind-script',
    async next(ctx: PolicyContext): Promise<AssistantMessage> {
      const req = ctx.environment as KmRequest | undefined;
      if (!req || typeof req !== 'object' || !('kind' in req))
        throw new Error('knowledgemind-script plays the knowledgemind protocol only');
      if (req.kind === 'expand') {
        const raw = req.candidates.map((c) => verifierRaw(c, settings));
        const scaled = rescale(raw);
        const scores = Object.fromEntries(req.candidates.map((c, i) => [c.service, scaled[i]]));
        return hermes('Verifier: metric and log anomalies together weigh most, then errors, then warnings.', 'score_services', { scores });
      }
      if (req.kind === 'simulate') {
        const total = req.callers.reduce((a, c) => a + c.anomalies, 0);
        const score = Math.min(10, Math.max(1, Math.round(1 + total / settings.simulation_scale)));
        return hermes(`The callers of ${req.service} carry ${total} alarm(s).`, 'score_simulation', { score });
      }
      const end = req.end;
      const alarmedPods = end.pods.filter((p) => p.metrics + p.logs + p.trace > 0);
      const pod = alarmedPods.length === 1 ? alarmedPods[0].pod : end.pods.length === 1 ? end.pods[0].pod : undefined;
      const where: RootCause = pod ? { service: end.service, pod } : { service: end.service };
      const root_causes = types(end, settings).map((type) => ({ ...where, type }));
      return hermes(`The search ends at ${end.service}${pod ? `, whose anomalies sit in ${pod}` : ''}.`, 'print_results', { root_causes });
    },
  };
}

registerPolicy({
  name: 'knowledgemind-script',
  kind: 'agent',
  protocol: 'knowledgemind',
  description:
    'KnowledgeMind-scripted: anomaly-count verifier and simulation scores for the environment-run MCTS (a stand-in, not KnowledgeMind)',
  settings: KnowledgeMindScriptSettingsSchema,
  create: (_dataset, settings) => createKnowledgeMindScript(settings),
});
