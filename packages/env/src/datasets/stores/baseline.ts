/**
 * Fault-free statistics keyed by span context. A span's context is, from most to least
 * specific: parent signature > own signature > its callee (for a client span, whose only
 * children run in another service); parent > own; own. Signatures are "service operation",
 * since operation names like `HTTP POST` alone mix unrelated calls.
 */
import type { Baseline, Span, TraceStore } from '../../types';

/** [count, mean µs, std µs] */
export type Stat = [number, number, number];

export interface BaselineData {
  /** Occurrences a context needs before it is preferred over a less specific one. */
  min_count: number;
  spans: Record<string, Stat>;
  /** context -> [occurrences, child signature -> [total calls, occurrences with the child]] */
  children: Record<string, [number, Record<string, [number, number]>]>;
  /** Endpoint signature (see endpointOf) -> entry latency statistics. */
  endpoints: Record<string, Stat>;
}

export const signature = (s: Span) => `${s.service} ${s.operation}`;

/** Context keys of a span, most specific first. */
export function contextKeys(span: Span, traces: TraceStore): string[] {
  const parent = span.parent_id === null ? undefined : traces.span(span.parent_id);
  const own = signature(span);
  const withParent = `${parent ? signature(parent) : '^'} > ${own}`;
  const kids = traces.children(span.span_id);
  const callees = new Set(kids.map(signature));
  const keys = [withParent, own];
  if (kids.length > 0 && callees.size === 1 && kids.every((k) => k.service !== span.service)) {
    keys.unshift(`${withParent} > ${[...callees][0]}`);
  }
  return keys;
}

/**
 * The endpoint a request called: the first span (by start) in another service than the entry
 * whose parent runs in the entry's service, e.g. `ts-order-service /api/v1/orderservice/order/tickets`
 * below the gateway; the entry's own signature when the request never leaves its service.
 */
export function endpointOf(traces: TraceStore, traceId: string): string | undefined {
  const entry = traces.entry(traceId);
  if (!entry) return undefined;
  for (const s of traces.trace(traceId)) {
    if (s.parent_id === null || s.service === entry.service) continue;
    if (traces.span(s.parent_id)?.service === entry.service) return signature(s);
  }
  return signature(entry);
}

class Acc {
  n = 0;
  sum = 0;
  sq = 0;
  add(v: number) {
    this.n++;
    this.sum += v;
    this.sq += v * v;
  }
  stat(): Stat {
    const mean = this.sum / this.n;
    return [this.n, mean, Math.sqrt(Math.max(0, this.sq / this.n - mean * mean))];
  }
}

/** Statistics of fault-free traces held in a TraceStore of their own. */
export function computeBaseline(traces: TraceStore, minCount: number): BaselineData {
  const spans = new Map<string, Acc>();
  const endpoints = new Map<string, Acc>();
  const children: BaselineData['children'] = {};
  const acc = (m: Map<string, Acc>, k: string) => m.get(k) ?? m.set(k, new Acc()).get(k)!;
  for (const traceId of traces.traceIds()) {
    const entry = traces.entry(traceId);
    const ep = endpointOf(traces, traceId);
    if (entry && ep) acc(endpoints, ep).add(entry.duration_us);
    for (const s of traces.trace(traceId)) {
      const keys = contextKeys(s, traces);
      for (const k of keys) acc(spans, k).add(s.duration_us);
      const counts = new Map<string, number>();
      for (const c of traces.children(s.span_id)) counts.set(signature(c), (counts.get(signature(c)) ?? 0) + 1);
      for (const k of keys.slice(-2)) {
        const e = (children[k] ??= [0, {}]);
        e[0]++;
        for (const [sig, n] of counts) {
          const c = (e[1][sig] ??= [0, 0]);
          c[0] += n;
          c[1]++;
        }
      }
    }
  }
  const stats = (m: Map<string, Acc>) => Object.fromEntries([...m].map(([k, a]) => [k, a.stat()]));
  return { min_count: minCount, spans: stats(spans), children, endpoints: stats(endpoints) };
}

export class ContextBaseline implements Baseline {
  constructor(
    readonly data: BaselineData,
    private readonly traces: TraceStore,
  ) {}

  /** The most specific key with enough occurrences, else the most specific known one. */
  private pick<T>(keys: string[], table: Record<string, T>, count: (t: T) => number): T | undefined {
    const known = keys.filter((k) => table[k] !== undefined);
    return known.map((k) => table[k]).find((t) => count(t) >= this.data.min_count) ?? (known.length ? table[known[0]] : undefined);
  }

  duration(span: Span): { meanUs: number; stdUs: number; count: number } | undefined {
    const s = this.pick(contextKeys(span, this.traces), this.data.spans, (t) => t[0]);
    return s && { count: s[0], meanUs: s[1], stdUs: s[2] };
  }

  /** Mean number of calls of each child signature per occurrence of the span's context. */
  childPattern(span: Span): Map<string, number> | undefined {
    const p = this.childPresence(span);
    return p && new Map([...p.children].map(([sig, c]) => [sig, c.perCall]));
  }

  /** Child statistics with how often each child is present at all (fraction of occurrences). */
  childPresence(span: Span): { occurrences: number; children: Map<string, { perCall: number; presence: number }> } | undefined {
    const e = this.pick(contextKeys(span, this.traces).slice(-2), this.data.children, (t) => t[0]);
    if (!e) return undefined;
    const [n, sigs] = e;
    return {
      occurrences: n,
      children: new Map(Object.entries(sigs).map(([sig, [total, present]]) => [sig, { perCall: total / n, presence: present / n }])),
    };
  }

  endpoint(signatureOfEndpoint: string): { meanUs: number; stdUs: number; count: number } | undefined {
    const s = this.data.endpoints[signatureOfEndpoint];
    return s && { count: s[0], meanUs: s[1], stdUs: s[2] };
  }
}
