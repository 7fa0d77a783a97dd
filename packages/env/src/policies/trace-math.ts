/** Span arithmetic the baselines share: self time, and traces by entry time. */
import type { Span, TraceStore } from '../types';

/**
 * Self time of a span: its duration less the time covered by its children (the union of
 * their intervals clipped to the span, so parallel children are not subtracted twice).
 */
export function selfTimeUs(span: Span, children: Span[]): number {
  const end = span.start_us + span.duration_us;
  const iv = children
    .map((c) => [Math.max(c.start_us, span.start_us), Math.min(c.start_us + c.duration_us, end)] as const)
    .filter(([a, b]) => b > a)
    .sort((x, y) => x[0] - y[0]);
  let covered = 0;
  let curA = -Infinity;
  let curB = -Infinity;
  for (const [a, b] of iv) {
    if (a > curB) {
      if (curB > curA) covered += curB - curA;
      curA = a;
      curB = b;
    } else if (b > curB) curB = b;
  }
  if (curB > curA) covered += curB - curA;
  return Math.max(0, span.duration_us - covered);
}

/** Trace ids sorted by entry start, for window queries in O(log n + result). */
export class TraceTimeIndex {
  private readonly starts: Float64Array;
  private readonly ids: string[];

  constructor(store: TraceStore) {
    const rows: [number, string][] = [];
    for (const id of store.traceIds()) {
      const e = store.entry(id);
      if (e) rows.push([e.start_us, id]);
    }
    rows.sort((a, b) => a[0] - b[0]);
    this.starts = Float64Array.from(rows, (r) => r[0]);
    this.ids = rows.map((r) => r[1]);
  }

  private lowerBound(t: number): number {
    let lo = 0;
    let hi = this.starts.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.starts[mid] < t) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Trace ids whose entry starts in [fromUs, toUs]. */
  between(fromUs: number, toUs: number): string[] {
    return this.ids.slice(this.lowerBound(fromUs), this.lowerBound(toUs + 1));
  }
}

/**
 * The span of the endpoint a request called: the first span (by start) outside the entry's
 * service whose parent runs in the entry's service; the entry itself when there is none.
 * Its duration is the request's latency without the gateway, and its baseline context is
 * specific to the endpoint (the entry span's context is shared by every request).
 */
export function endpointSpan(store: TraceStore, traceId: string): Span | undefined {
  const entry = store.entry(traceId);
  if (!entry) return undefined;
  for (const s of store.trace(traceId)) {
    if (s.parent_id === null || s.service === entry.service) continue;
    if (store.span(s.parent_id)?.service === entry.service) return s;
  }
  return entry;
}
