/**
 * KnowledgeMind's anomaly alarm agent and alarm graph agent (../shared/seeds/003, Sec. 3.1 and
 * Alg. 1), over the project's detectors: per service, the metric series of its pods beyond the
 * n-sigma band around the case time (the n-sigma residual stands in for ARIMA), its error and
 * warning log templates new or risen against their usual rate (the project's templates stand in
 * for Drain), and its spans in the case's trace that are slow, errored or miss usual calls.
 * The dependency graph G_dep is the service call edges of the requests outside every fault window.
 */
import { diffCalls } from '../../tools/call-pattern';
import { fluctuationWindow, measureFluctuation } from '../../tools/fluctuation';
import type { ToolSettings } from '../../tools/settings';
import type { Case, Dataset } from '../../types';

export interface ServiceAlarm {
  service: string;
  /** Metric series beyond the band, by name (pod and node series of the service's pods). */
  metrics: string[];
  /** Error / warning log templates new to the service or at least log_ratio times their usual rate. */
  errorLogs: number;
  warnLogs: number;
  /** Spans in the case's trace that are slow, errored or miss usual calls. */
  trace: number;
  /** Of those, spans that miss usual calls or gained unusual ones ("service operation"). */
  patternChanges: number;
  /** Per pod: metric series beyond the band, anomalous log templates, anomalous spans (the service-pod agent). */
  pods: { pod: string; metrics: number; logs: number; trace: number }[];
}

export interface AlarmSettings {
  /** A log template counts when new or at least this many times its usual rate. */
  log_ratio: number;
  /** A metric series alarms beyond this many sigmas (above the tools' n, which most series break now and then). */
  metric_sigma: number;
}

export const alarmCount = (a: ServiceAlarm): number => a.metrics.length + a.errorLogs + a.warnLogs + a.trace;

export function serviceAlarms(dataset: Dataset, c: Case, tools: ToolSettings, s: AlarmSettings): Map<string, ServiceAlarm> {
  const out = new Map<string, ServiceAlarm>();
  const tS = c.timestamp_us / 1e6;
  const halfUs = tools.log_delta_s * 1e6;
  const minutes = (2 * tools.log_delta_s) / 60;
  const spans = dataset.traces.trace(c.trace_id);
  for (const service of dataset.topology.services) {
    const alarm: ServiceAlarm = { service, metrics: [], errorLogs: 0, warnLogs: 0, trace: 0, patternChanges: 0, pods: [] };
    for (const { pod } of dataset.topology.pods.filter((p) => p.service === service)) {
      const podAlarm = { pod, metrics: 0, logs: 0, trace: 0 };
      for (const series of dataset.metrics.series(pod)) {
        const f = measureFluctuation(series, fluctuationWindow(tools, tS));
        if (f && Math.abs(f.max_deviation_sigma) > s.metric_sigma) {
          alarm.metrics.push(series.name);
          podAlarm.metrics++;
        }
      }
      const counts = new Map<string, { level: string; templateId: number; n: number }>();
      for (const r of dataset.logs.query(pod, c.timestamp_us - halfUs, c.timestamp_us + halfUs, ['error', 'warn'])) {
        const k = `${r.template_id}|${r.level}`;
        const e = counts.get(k) ?? { level: r.level, templateId: r.template_id, n: 0 };
        e.n++;
        counts.set(k, e);
      }
      for (const e of counts.values()) {
        const usual = dataset.logs.baselineRate(service, e.templateId);
        const anomalous = usual === 0 || (usual !== undefined && e.n / minutes >= s.log_ratio * usual);
        if (!anomalous) continue;
        if (e.level === 'error') alarm.errorLogs++;
        else alarm.warnLogs++;
        podAlarm.logs++;
      }
      for (const sp of spans.filter((x) => x.pod === pod)) {
        const usual = dataset.baseline.duration(sp);
        const slow = usual !== undefined && usual.meanUs > 0 && sp.duration_us / usual.meanUs >= tools.slow_ratio;
        const d = diffCalls(dataset.baseline, sp, dataset.traces.children(sp.span_id), tools.missing_call_min_rate);
        const changed = d.missing.length + d.added.length > 0;
        if (changed) alarm.patternChanges++;
        if (slow || changed || sp.status === 'error') {
          alarm.trace++;
          podAlarm.trace++;
        }
      }
      alarm.pods.push(podAlarm);
    }
    out.set(service, alarm);
  }
  return out;
}

const depCache = new WeakMap<Dataset, Map<string, Set<string>>>();

/** G_dep: caller service -> callee services, from the requests that start outside every fault window. */
export function dependencyGraph(dataset: Dataset): Map<string, Set<string>> {
  const cached = depCache.get(dataset);
  if (cached) return cached;
  const windows = dataset.faults.map((f) => [f.start_us, f.end_us] as const);
  const g = new Map<string, Set<string>>();
  for (const id of dataset.traces.traceIds()) {
    const entry = dataset.traces.entry(id);
    if (!entry || windows.some(([a, b]) => entry.start_us >= a && entry.start_us <= b)) continue;
    for (const sp of dataset.traces.trace(id)) {
      const parent = sp.parent_id === null ? undefined : dataset.traces.span(sp.parent_id);
      if (!parent || parent.service === sp.service) continue;
      const set = g.get(parent.service) ?? new Set<string>();
      set.add(sp.service);
      g.set(parent.service, set);
    }
  }
  depCache.set(dataset, g);
  return g;
}

/**
 * Alg. 1: G' = the alarmed services and their ancestors (transitive callers) in G_dep; G = G' ∩ N
 * with N the services of the case's trace (the request under study). Returns G's services and
 * the caller -> callee edges among them.
 */
export function alarmGraph(
  dep: Map<string, Set<string>>,
  alarmed: Set<string>,
  inTrace: Set<string>,
): { services: Set<string>; edges: Map<string, string[]> } {
  const callers = new Map<string, Set<string>>();
  for (const [from, tos] of dep) for (const to of tos) (callers.get(to) ?? callers.set(to, new Set()).get(to)!).add(from);
  const gPrime = new Set<string>(alarmed);
  const stack = [...alarmed];
  while (stack.length) {
    const s = stack.pop()!;
    for (const p of callers.get(s) ?? [])
      if (!gPrime.has(p)) {
        gPrime.add(p);
        stack.push(p);
      }
  }
  const services = new Set([...gPrime].filter((s) => inTrace.has(s)));
  const edges = new Map<string, string[]>();
  for (const s of [...services].sort()) edges.set(s, [...(dep.get(s) ?? [])].filter((t) => services.has(t) && t !== s).sort());
  return { services, edges };
}
