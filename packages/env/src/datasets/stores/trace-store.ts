/**
 * Spans in columnar form (string tables, numeric columns) as stored on disk, and the indexed
 * TraceStore over them: span id, parent id and trace id lookups are hash or offset lookups.
 */
import type { Span, TraceStore } from '../../types';
import { StringTable } from './strings';

const STATUS: Span['status'][] = ['unset', 'ok', 'error'];

export interface TraceColumns {
  strings: string[];
  trace_ids: string[];
  span_ids: string[];
  /** Index into trace_ids. */
  trace: number[];
  /** Raw parent span id as a string-table index; -1 for an entry span. */
  parent: number[];
  service: number[];
  pod: number[];
  operation: number[];
  start_us: number[];
  duration_us: number[];
  /** Index into STATUS. */
  status: number[];
  /** String-table index of the raw status code, -1 when none. */
  status_code: number[];
}

/** Spans -> columns; a span id seen twice keeps its first occurrence. */
export function toTraceColumns(spans: Iterable<Span>): TraceColumns {
  const strings = new StringTable();
  const traces = new StringTable();
  const seen = new Set<string>();
  const c: TraceColumns = {
    strings: strings.values,
    trace_ids: traces.values,
    span_ids: [],
    trace: [],
    parent: [],
    service: [],
    pod: [],
    operation: [],
    start_us: [],
    duration_us: [],
    status: [],
    status_code: [],
  };
  for (const s of spans) {
    if (seen.has(s.span_id)) continue;
    seen.add(s.span_id);
    c.span_ids.push(s.span_id);
    c.trace.push(traces.id(s.trace_id));
    c.parent.push(s.parent_id === null ? -1 : strings.id(s.parent_id));
    c.service.push(strings.id(s.service));
    c.pod.push(strings.id(s.pod));
    c.operation.push(strings.id(s.operation));
    c.start_us.push(s.start_us);
    c.duration_us.push(s.duration_us);
    c.status.push(STATUS.indexOf(s.status));
    c.status_code.push(s.status_code === undefined ? -1 : strings.id(s.status_code));
  }
  return c;
}

/** Groups indices by key into offset/list arrays (CSR), each group ordered by `order`. */
function groupBy(n: number, groups: number, key: (i: number) => number, order: ArrayLike<number>) {
  const start = new Int32Array(groups + 1);
  for (let i = 0; i < n; i++) {
    const k = key(i);
    if (k >= 0) start[k + 1]++;
  }
  for (let g = 0; g < groups; g++) start[g + 1] += start[g];
  const fill = start.slice(0, groups);
  const list = new Int32Array(start[groups]);
  for (let i = 0; i < n; i++) {
    const k = key(i);
    if (k >= 0) list[fill[k]++] = i;
  }
  for (let g = 0; g < groups; g++) {
    if (start[g + 1] - start[g] > 1) list.subarray(start[g], start[g + 1]).sort((a, b) => order[a] - order[b] || a - b);
  }
  return { start, list };
}

export class ColumnarTraceStore implements TraceStore {
  readonly size: number;
  private readonly spans: Span[];
  private readonly bySpanId = new Map<string, number>();
  private readonly byTraceId = new Map<string, number>();
  private readonly kids: { start: Int32Array; list: Int32Array };
  private readonly members: { start: Int32Array; list: Int32Array };
  private readonly traceIdList: string[];

  constructor(c: TraceColumns, nodeOfPod: (pod: string) => string | undefined = () => undefined) {
    const n = c.span_ids.length;
    this.size = n;
    this.traceIdList = c.trace_ids;
    this.spans = new Array<Span>(n);
    for (let i = 0; i < n; i++) {
      const pod = c.strings[c.pod[i]];
      const span: Span = {
        trace_id: c.trace_ids[c.trace[i]],
        span_id: c.span_ids[i],
        parent_id: c.parent[i] < 0 ? null : c.strings[c.parent[i]],
        service: c.strings[c.service[i]],
        pod,
        operation: c.strings[c.operation[i]],
        start_us: c.start_us[i],
        duration_us: c.duration_us[i],
        status: STATUS[c.status[i]],
      };
      const node = nodeOfPod(pod);
      if (node !== undefined) span.node = node;
      if (c.status_code[i] >= 0) span.status_code = c.strings[c.status_code[i]];
      this.spans[i] = span;
      this.bySpanId.set(span.span_id, i);
    }
    c.trace_ids.forEach((t, i) => this.byTraceId.set(t, i));
    const parentIndex = (i: number) => {
      const p = this.spans[i].parent_id;
      return p === null ? -1 : (this.bySpanId.get(p) ?? -1);
    };
    this.kids = groupBy(n, n, parentIndex, c.start_us);
    this.members = groupBy(n, c.trace_ids.length, (i) => c.trace[i], c.start_us);
  }

  span(spanId: string): Span | undefined {
    const i = this.bySpanId.get(spanId);
    return i === undefined ? undefined : this.spans[i];
  }

  children(spanId: string): Span[] {
    const i = this.bySpanId.get(spanId);
    return i === undefined ? [] : this.slice(this.kids, i);
  }

  trace(traceId: string): Span[] {
    const t = this.byTraceId.get(traceId);
    return t === undefined ? [] : this.slice(this.members, t);
  }

  traceIds(): Iterable<string> {
    return this.traceIdList;
  }

  entry(traceId: string): Span | undefined {
    const t = this.byTraceId.get(traceId);
    if (t === undefined) return undefined;
    const { start, list } = this.members;
    for (let k = start[t]; k < start[t + 1]; k++) if (this.spans[list[k]].parent_id === null) return this.spans[list[k]];
    return undefined;
  }

  private slice(g: { start: Int32Array; list: Int32Array }, i: number): Span[] {
    const out: Span[] = [];
    for (let k = g.start[i]; k < g.start[i + 1]; k++) out.push(this.spans[g.list[k]]);
    return out;
  }
}
