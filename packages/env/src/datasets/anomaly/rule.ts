/** What an anomaly rule sees and returns. */
import type { Span, TraceStore } from '../../types';
import type { AnomalySettings } from '../settings';
import type { ContextBaseline } from '../stores/baseline';

export interface AnomalyContext {
  traces: TraceStore;
  baseline: ContextBaseline;
  settings: AnomalySettings;
}

export interface AnomalyVerdict {
  reason: string;
  score: number;
}

export interface AnomalyRule {
  name: string;
  /** A verdict when the request whose entry span is given is anomalous, else undefined. */
  judge(entry: Span, ctx: AnomalyContext): AnomalyVerdict | undefined;
}

export const ms = (us: number) => `${(us / 1000).toFixed(1)} ms`;

/** The first span of the trace with an error status, entry first. */
export function errorSpan(entry: Span, traces: TraceStore): Span | undefined {
  if (entry.status === 'error') return entry;
  return traces.trace(entry.trace_id).find((s) => s.status === 'error');
}
