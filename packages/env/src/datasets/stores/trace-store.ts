/**
 * Spans in columnar form (string tables, numeric columns) as stored on disk, and the indexed
 * TraceStore over them: span id, parent id and trace id lookups are hash or offset lookups.
 */
import type { Span, TraceStore } from '../../types';
import { StringTable } from './strings';

const STATUS: Span['status'][] = ['unset', 'ok', 'error'];

export interface TraceColumns {
  strings: string[];
  traceIds: string[];
  spanIds: string[];
  /** Index into traceIds. */
  trace: number[];
  /** Raw parent span id as a string-table index; -1 for an entry span. */
  parent: number[];
  service: number[];
  pod: number[];
  operation: number[];
  startUs: number[];
  durationUs: number[];
  /** Index into STATUS. */
  status: number[];
  /** String-table index of the raw status code, -1 when none. */
  statusCode: number[];
}

/** Spans -> columns; a span id seen twice keeps its first occurrence. */
export function toTraceColumns(spans: Iterable<Span>): TraceColumns {
  const strings = new StringTable();
  const traces = new StringTable();
  const seen = new Set<string>();
  const c: TraceColumns = {
    strings: strings.values,
    traceIds: traces.values,
    spanIds: [],
    trace: [],
    parent: [],
    service: [],
    pod: [],
    operation: [],
    startUs: [],
    durationUs: [],
    status: [],
    statusCode: [],
  };
  for (const s of spans) {
    if (seen.has(s.spanId)) continue;
    seen.add(s.spanId);
    c.spanIds.push(s.spanId);
    c.trace.push(traces.id(s.traceId));
    c.parent.push(s.parentId === null ? -1 : strings.id(s.parentId));
    c.service.push(strings.id(s.service));
    c.pod.push(strings.id(s.pod));
    c.operation.push(strings.id(s.operation));
    c.startUs.push(s.startUs);
    c.durationUs.push(s.durationUs);
    c.status.push(STATUS.indexOf(s.status));
    c.statusCode.push(s.statusCode === undefined ? -1 : strings.id(s.statusCode));
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
    const n = c.spanIds.length;
    this.size = n;
    this.traceIdList = c.traceIds;
    this.spans = new Array<Span>(n);
    for (let i = 0; i < n; i++) {
      const pod = c.strings[c.pod[i]];
      const span: Span = {
        traceId: c.traceIds[c.trace[i]],
        spanId: c.spanIds[i],
        parentId: c.parent[i] < 0 ? null : c.strings[c.parent[i]],
        service: c.strings[c.service[i]],
        pod,
        operation: c.strings[c.operation[i]],
        startUs: c.startUs[i],
        durationUs: c.durationUs[i],
        status: STATUS[c.status[i]],
      };
      const node = nodeOfPod(pod);
      if (node !== undefined) span.node = node;
      if (c.statusCode[i] >= 0) span.statusCode = c.strings[c.statusCode[i]];
      this.spans[i] = span;
      this.bySpanId.set(span.spanId, i);
    }
    c.traceIds.forEach((t, i) => this.byTraceId.set(t, i));
    const parentIndex = (i: number) => {
      const p = this.spans[i].parentId;
      return p === null ? -1 : (this.bySpanId.get(p) ?? -1);
    };
    this.kids = groupBy(n, n, parentIndex, c.startUs);
    this.members = groupBy(n, c.traceIds.length, (i) => c.trace[i], c.startUs);
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
    for (let k = start[t]; k < start[t + 1]; k++) if (this.spans[list[k]].parentId === null) return this.spans[list[k]];
    return undefined;
  }

  private slice(g: { start: Int32Array; list: Int32Array }, i: number): Span[] {
    const out: Span[] = [];
    for (let k = g.start[i]; k < g.start[i + 1]; k++) out.push(this.spans[g.list[k]]);
    return out;
  }
}
