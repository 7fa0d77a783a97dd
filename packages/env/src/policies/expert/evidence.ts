/**
 * What the expert knows after its tool calls so far, rebuilt from the structured data of the
 * observations (never from the ground truth): the spans seen and which were opened, and the
 * metric and log findings per component.
 */
import type { SearchLogsData, SearchMetricsData, SearchTracesData, SpanSummary } from '../../tools';
import { isErrorHandler } from '../../tools/call-pattern';
import type { ToolCallRecord } from '../../types';

export interface KnownSpan {
  summary: SpanSummary;
  parentId?: string;
  depth: number;
  /** Children listed by search_traces; undefined while the span was not opened. */
  children?: string[];
}

export interface Evidence {
  spans: Map<string, KnownSpan>;
  metrics: Map<string, SearchMetricsData>;
  logs: Map<string, SearchLogsData>;
  /** Tool calls made (print_results excluded), by tool name. */
  calls: Map<string, number>;
}

export function gatherEvidence(toolCalls: ToolCallRecord[]): Evidence {
  const ev: Evidence = { spans: new Map(), metrics: new Map(), logs: new Map(), calls: new Map() };
  const see = (summary: SpanSummary, parentId: string | undefined, depth: number): KnownSpan => {
    let k = ev.spans.get(summary.span_id);
    if (!k) {
      k = { summary, parentId, depth };
      ev.spans.set(summary.span_id, k);
    }
    return k;
  };
  for (const call of toolCalls) {
    ev.calls.set(call.name, (ev.calls.get(call.name) ?? 0) + 1);
    const obs = call.observation;
    if (!obs.ok || obs.data === undefined) continue;
    if (call.name === 'search_traces') {
      const d = obs.data as SearchTracesData;
      const parent = see(d.parent, undefined, 0);
      parent.children = d.children.map((c) => c.span_id);
      for (const c of d.children) see(c, d.parent.span_id, parent.depth + 1);
    } else if (call.name === 'search_fluctuating_metrics') {
      const d = obs.data as SearchMetricsData;
      ev.metrics.set(d.component, d);
    } else if (call.name === 'search_logs') {
      const d = obs.data as SearchLogsData;
      ev.logs.set(d.component, d);
    }
  }
  return ev;
}

/** Excess over the usual duration in µs (0 without a baseline). */
export const excessUs = (s: SpanSummary): number => (s.usual_mean_us === undefined ? 0 : s.duration_us - s.usual_mean_us);

/** Slow as the tool marks it (ratio to usual at or above its slow ratio), or far out in sigmas. */
export const isSlow = (s: SpanSummary, slowZ: number): boolean => s.slow || zScore(s) > slowZ;

/** Much shorter than usual, as a call cut short by a failure is. */
export const isFast = (s: SpanSummary, fastRatio: number): boolean =>
  s.ratio !== undefined && s.ratio <= fastRatio && (s.usual_mean_us ?? 0) - s.duration_us > 1000;

/** How far the span is from its usual duration, in usual standard deviations (floored at 10% of the mean). */
export function zScore(s: SpanSummary): number {
  if (s.usual_mean_us === undefined) return 0;
  const sd = Math.max(s.usual_std_us ?? 0, 0.1 * s.usual_mean_us, 200);
  return (s.duration_us - s.usual_mean_us) / sd;
}

/** The span's own service started an error handler below it this time (one definition, beside the tool's verdicts). */
export { raisedError } from '../../tools/search-traces';

/** Changes of the call pattern other than a new error handler. */
export const otherChanges = (s: SpanSummary): { missing: string[]; added: string[] } => ({
  missing: s.calls.missing.filter((m) => !isErrorHandler(m)),
  added: s.calls.added.filter((a) => !isErrorHandler(a)),
});

/** Service names in "service operation" call signatures. */
export const serviceOfSignature = (sig: string): string => sig.split(' ')[0];
