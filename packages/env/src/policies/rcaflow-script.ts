/**
 * `rcaflow-script`: a scripted stand-in for RCAFlow's LLM roles on the `rcaflow` protocol,
 * reported as "rcaflow-scripted" (../shared/notes/seed-systems.md 4.4c). One fixed template (the
 * protocol's default workflow); no code generation. At each step it fills the offered tool's
 * arguments from its own evidence (the span most worth opening, the top suspect's metrics or
 * logs); its confidence is the share of steps that found an anomaly; a re-planning step opens
 * the next lead or checks the next suspect. It reads only its observations, never the truth.
 */
import { z } from 'zod';
import type { RcaFlowRequest } from '../episodes/rcaflow/protocol';
import type { AssistantMessage, Policy, PolicyContext, RootCause } from '../types';
import { type Evidence, gatherEvidence, type KnownSpan, otherChanges, raisedError } from './expert/evidence';
import { hermes } from './expert/messages';
import { interest, rankSuspects } from './expert/decide';
import type { SuspectSettings } from './expert/kinds/kind';
import { registerPolicy } from './registry';

export const RcaFlowScriptSettingsSchema = z.object({
  /** Besides the tool's SLOW mark, a span is slow this many usual standard deviations above usual. Default 3. */
  slow_z: z.number().positive().default(3),
  /** A span is cut short at this fraction of its usual duration. Default 0.5. */
  fast_ratio: z.number().gt(0).lt(1).default(0.5),
  /** An error log template counts when new or this many times its usual rate. Default 3. */
  log_ratio: z.number().positive().default(3),
  /** Type (OpenRCA reason) named for CPU metrics off their band. Default cpu_contention (Nezha's label). */
  type_cpu: z.string().min(1).default('cpu_contention'),
  /** Type named for new or risen error logs or an error handler. Default exception (Nezha's label). */
  type_error: z.string().min(1).default('exception'),
  /** Type named for a changed call pattern. Default return (Nezha's label). */
  type_pattern: z.string().min(1).default('return'),
  /** Type named otherwise. Default network_delay. */
  type_delay: z.string().min(1).default('network_delay'),
  /** Most root causes in the answer. Default 5. */
  max_answers: z.number().int().min(1).default(5),
});
export type RcaFlowScriptSettings = z.infer<typeof RcaFlowScriptSettingsSchema>;

/** "YYYY-MM-DD HH:MM:SS" in UTC, OpenRCA's time format. */
export const openRcaTime = (us: number): string => new Date(Math.floor(us / 1000)).toISOString().slice(0, 19).replace('T', ' ');

function nextSpan(ev: Evidence, s: SuspectSettings): KnownSpan | undefined {
  let best: KnownSpan | undefined;
  let bestV = 0;
  for (const k of ev.spans.values()) {
    const v = interest(ev, k, s);
    if (v > bestV) {
      best = k;
      bestV = v;
    }
  }
  if (best) return best;
  return [...ev.spans.values()].filter((k) => k.children === undefined && k.summary.child_count > 0).sort((a, b) => b.depth - a.depth)[0];
}

function typeOf(ev: Evidence, pod: string, service: string, s: RcaFlowScriptSettings): string {
  const metrics = ev.metrics.get(pod)?.fluctuating ?? [];
  if (metrics.some((f) => /cpu/i.test(f.metric) && (f.component === pod || f.component === service))) return s.type_cpu;
  const logs = ev.logs.get(service)?.templates ?? [];
  const spans = [...ev.spans.values()].filter((k) => k.summary.pod === pod);
  if (
    logs.some((t) => t.level === 'error' && (t.unseen_in_baseline || (t.ratio ?? 0) >= s.log_ratio)) ||
    spans.some((k) => raisedError(k.summary))
  )
    return s.type_error;
  if (spans.some((k) => otherChanges(k.summary).missing.length > 0)) return s.type_pattern;
  return s.type_delay;
}

export function createRcaFlowScript(settings: RcaFlowScriptSettings): Policy {
  // The expert's weights for the evidence it does not tune here; silent log statements left out, as when its figures were measured.
  const sus: SuspectSettings = {
    slowZ: settings.slow_z,
    fastRatio: settings.fast_ratio,
    logRatio: settings.log_ratio,
    callerErrorWeight: 0.6,
    risenLogWeight: 0.5,
    silentLogWeight: 0,
    fastLeadWeight: 0.6,
    calmFastLeadBonus: 0,
  };
  return {
    name: 'rcaflow-script',
    async next(ctx: PolicyContext): Promise<AssistantMessage> {
      const req = ctx.environment as RcaFlowRequest | undefined;
      if (!req || typeof req !== 'object' || !('kind' in req)) throw new Error('rcaflow-script plays the rcaflow protocol only');
      const ev = gatherEvidence(ctx.toolCalls.filter((c) => c.name.startsWith('search_')));
      const suspects = rankSuspects(ev, sus);
      const caseUs = ctx.case.timestamp_us;
      const ts = Math.round(caseUs / 1e6);
      const entry =
        ctx.messages.map((m) => (m.role === 'user' ? /Entry span: (\S+)/.exec(m.content)?.[1] : undefined)).find(Boolean) ??
        ctx.case.entry_span_id;
      const openTrace = (why: string): AssistantMessage => {
        const k = ev.calls.get('search_traces') ? nextSpan(ev, sus) : undefined;
        return hermes(why, 'search_traces', { parent_span_id: k?.summary.ref ?? entry });
      };
      const top = suspects[0];
      const fallbackPod = [...ev.spans.values()].find((k) => k.depth === 0)?.summary.pod ?? '';
      if (req.kind === 'confidence') {
        const c = req.leaves.length ? req.leaves.filter((l) => l.success).length / req.leaves.length : 0;
        return hermes(
          `${req.leaves.filter((l) => l.success).length} of ${req.leaves.length} steps found an anomaly.`,
          'report_confidence',
          { confidence: +c.toFixed(4) },
        );
      }
      if (req.kind === 'leaf' || req.kind === 'replan') {
        const tool =
          req.kind === 'leaf'
            ? req.tool
            : nextSpan(ev, sus)
              ? 'search_traces'
              : top && !ev.metrics.has(top.pod)
                ? 'search_fluctuating_metrics'
                : 'search_logs';
        if (tool === 'search_traces') return openTrace('I open the span most worth following.');
        if (tool === 'search_fluctuating_metrics') {
          const pod = top?.pod ?? fallbackPod;
          return hermes(`I check the metrics of ${pod}.`, tool, { service_name: pod, timestamp: ts });
        }
        const target = (req.kind === 'replan' ? suspects.find((x) => !ev.logs.has(x.service)) : top)?.service ?? fallbackPod;
        return hermes(`I read the error logs of ${target}.`, 'search_logs', { service_name: target, timestamp: ts });
      }
      const root_causes: RootCause[] = suspects.slice(0, settings.max_answers).map((x) => {
        const type = typeOf(ev, x.pod, x.service, settings);
        const peaks = (ev.metrics.get(x.pod)?.fluctuating ?? []).map((f) => f.peak_ts * 1e6);
        return {
          service: x.service,
          pod: x.pod,
          type,
          reason: type,
          time: openRcaTime(peaks.length ? Math.min(...peaks) : caseUs),
        };
      });
      // Then the other pods on the opened path, deepest first: the fault is rarely above the evidence.
      for (const k of [...ev.spans.values()].sort((a, b) => b.depth - a.depth || b.summary.start_us - a.summary.start_us)) {
        if (root_causes.length >= settings.max_answers) break;
        if (!root_causes.some((r) => r.pod === k.summary.pod)) {
          const type = typeOf(ev, k.summary.pod, k.summary.service, settings);
          root_causes.push({ service: k.summary.service, pod: k.summary.pod, type, reason: type, time: openRcaTime(caseUs) });
        }
      }
      if (!root_causes.length) root_causes.push({ pod: fallbackPod, time: openRcaTime(caseUs) });
      return hermes('The workflow is done; I list the suspects with their reason and time.', 'print_results', { root_causes });
    },
  };
}

registerPolicy({
  name: 'rcaflow-script',
  kind: 'agent',
  protocol: 'rcaflow',
  description:
    'RCAFlow-scripted: the fixed default workflow with evidence-chosen arguments and count-based confidence (a stand-in, not RCAFlow)',
  settings: RcaFlowScriptSettingsSchema,
  create: (_dataset, settings) => createRcaFlowScript(settings),
});
