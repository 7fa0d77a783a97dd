/**
 * Cases: the anomalous requests of each fault window. Every fault ends with a case count
 * and, when it has none, the reason.
 */
import { createHash } from 'node:crypto';
import type { Case, Fault, GroundTruth, Span, TraceStore } from '../types';
import { anomalyRule } from './anomaly/index';
import type { CaseSettings } from './settings';
import type { ContextBaseline } from './stores/baseline';

export type FaultDraft = Omit<Fault, 'case_count' | 'no_case_reason'>;

export function truthName(t: GroundTruth): string {
  return (t.level === 'node' ? t.node : t.level === 'pod' ? t.pod : t.service) ?? '?';
}

/** Whether a span runs on the ground-truth component at the truth's level. */
export function touchesTruth(s: Span, t: GroundTruth): boolean {
  if (t.level === 'node') return s.node !== undefined && s.node === t.node;
  if (t.level === 'pod') return s.pod === t.pod;
  return s.service === t.service;
}

const rank = (traceId: string) => createHash('sha1').update(traceId).digest('hex');

export function deriveCases(
  drafts: FaultDraft[],
  traces: TraceStore,
  baseline: ContextBaseline,
  settings: CaseSettings,
): { faults: Fault[]; cases: Case[]; flagged: number[] } {
  const rule = anomalyRule(settings.anomaly.rule);
  const entries: Span[] = [];
  for (const t of traces.traceIds()) {
    const e = traces.entry(t);
    if (e) entries.push(e);
  }
  entries.sort((a, b) => a.start_us - b.start_us || (a.trace_id < b.trace_id ? -1 : 1));
  const ctx = { traces, baseline, settings: settings.anomaly };
  const faults: Fault[] = [];
  const cases: Case[] = [];
  const flaggedPerFault: number[] = [];
  for (const d of drafts) {
    const inWindow = entries.filter((e) => e.start_us >= d.start_us && e.start_us <= d.end_us);
    const flagged: Case[] = [];
    let total = 0;
    let reaching = 0;
    let reachingAll = 0;
    for (const e of inWindow) {
      const reaches = traces.trace(e.trace_id).some((s) => touchesTruth(s, d.truth));
      if (reaches) reachingAll++;
      const verdict = rule.judge(e, ctx);
      if (!verdict) continue;
      total++;
      if (reaches) reaching++;
      if (settings.require_truth_in_trace && !reaches) continue;
      flagged.push({
        id: `${d.id}/${e.trace_id}`,
        fault_id: d.id,
        trace_id: e.trace_id,
        entry_span_id: e.span_id,
        timestamp_us: e.start_us,
        entry_duration_us: e.duration_us,
        anomaly: { rule: rule.name, reason: verdict.reason, score: verdict.score },
        truth: d.truth,
      });
    }
    const chosen = flagged
      .map((c) => ({ c, r: rank(c.trace_id) }))
      .sort((a, b) => (a.r < b.r ? -1 : 1))
      .slice(0, settings.max_cases_per_fault)
      .map((x) => x.c)
      .sort((a, b) => a.timestamp_us - b.timestamp_us || (a.trace_id < b.trace_id ? -1 : 1));
    const who = truthName(d.truth);
    const notes = [
      ...d.notes,
      `rule '${rule.name}': ${total} of ${inWindow.length} requests in the window anomalous; ${reachingAll} reach ${who}, ${reaching} of them anomalous; ${chosen.length} kept as cases`,
    ];
    const fault: Fault = { ...d, notes, case_count: chosen.length };
    if (chosen.length === 0) {
      fault.no_case_reason =
        inWindow.length === 0
          ? 'no request starts inside the fault window'
          : total === 0
            ? `none of the ${inWindow.length} requests in the window is anomalous under rule '${rule.name}'`
            : `${reachingAll} requests in the window reach ${who} and none of them is anomalous under rule '${rule.name}' (the ${total} anomalous ones never reach it)`;
    }
    faults.push(fault);
    cases.push(...chosen);
    flaggedPerFault.push(flagged.length);
  }
  return { faults, cases, flagged: flaggedPerFault };
}
