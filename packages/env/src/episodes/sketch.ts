/**
 * The environment's sketch of one request for ORACL's single tagged turn (../shared/seeds/002,
 * Sec. IV-A: a data collector that discretises telemetry into Low/Medium/High bins): the call
 * graph of the request's trace by pod, with ids ①..⑩; per pod its spans against their usual
 * duration and call pattern, the metric deviations binned, and the error/warning log templates
 * with their counts against the usual rate. ORACL's resource tokens (C)(D)(M)(N) need
 * per-deployment profiles that the datasets do not have, so they are left out.
 */
import { diffCalls } from '../tools/call-pattern';
import { fluctuationWindow, measureFluctuation } from '../tools/fluctuation';
import type { ToolSettings } from '../tools/settings';
import type { Case, Dataset, LogLevel, Span } from '../types';

export type Bin = 'Low' | 'Medium' | 'High';

export interface SketchSettings {
  /** |deviation| in sigmas from which a metric is Medium. */
  medium_sigma: number;
  /** |deviation| in sigmas from which a metric is High. */
  high_sigma: number;
  /** Most pods described. */
  max_pods: number;
  /** Most log templates listed per pod. */
  max_templates: number;
}

export interface SketchMetric {
  metric: string;
  sigma: number;
  bin: Bin;
}

export interface SketchLog {
  template: string;
  level: LogLevel;
  count: number;
  /** Rate over the usual rate; undefined without a usual rate or when it is 0. */
  ratio?: number;
  /** Never logged by this service in the fault-free baseline. */
  unseen: boolean;
}

export interface SketchPod {
  /** 1-based id in the sketch. */
  id: number;
  pod: string;
  service: string;
  node?: string;
  spans: number;
  /** Spans at least the tool's slow ratio above their usual duration. */
  slowSpans: number;
  /** Largest duration / usual duration among its spans. */
  maxRatio?: number;
  /** Excess over usual of its spans less their children's excess, µs (its own delay). */
  ownExcessUs: number;
  errorSpans: number;
  /** Usual calls not made / unusual calls made below its spans ("service operation"). */
  missingCalls: string[];
  addedCalls: string[];
  /** Metrics in the Medium or High bin, largest first. */
  metrics: SketchMetric[];
  /** Series judged and found Low. */
  lowMetrics: number;
  logs: SketchLog[];
}

export interface OraclSketch {
  caseId: string;
  timestampUs: number;
  pods: SketchPod[];
  /** Calls between pods: caller id, callee id, number of calls. */
  edges: { from: number; to: number; calls: number }[];
  /** Pods left out by max_pods. */
  omitted: number;
}

export function binOf(sigma: number, s: SketchSettings): Bin {
  const a = Math.abs(sigma);
  return a >= s.high_sigma ? 'High' : a >= s.medium_sigma ? 'Medium' : 'Low';
}

const CIRCLED = ['①', '②', '③', '④', '⑤', '⑥', '⑦', '⑧', '⑨', '⑩'];
/** Table II's ids ①..⑩, then (11), (12), ... */
export const sketchId = (id: number): string => CIRCLED[id - 1] ?? `(${id})`;

function excess(dataset: Dataset, span: Span): number {
  const usual = dataset.baseline.duration(span);
  return usual ? span.duration_us - usual.meanUs : 0;
}

/** Its spans against their usual duration and calls: slow ones, the slowest ratio, its own delay, calls missing and added. */
function spanFacts(dataset: Dataset, own: Span[], tools: ToolSettings) {
  let slowSpans = 0;
  let maxRatio: number | undefined;
  let ownExcessUs = 0;
  const missing = new Set<string>();
  const added = new Set<string>();
  for (const sp of own) {
    const usual = dataset.baseline.duration(sp);
    if (usual && usual.meanUs > 0) {
      const r = sp.duration_us / usual.meanUs;
      maxRatio = Math.max(maxRatio ?? 0, r);
      if (r >= tools.slow_ratio) slowSpans++;
    }
    const kids = dataset.traces.children(sp.span_id);
    ownExcessUs += excess(dataset, sp) - kids.reduce((a, k) => a + Math.max(0, excess(dataset, k)), 0);
    const d = diffCalls(dataset.baseline, sp, kids, tools.missing_call_min_rate);
    d.missing.forEach((m) => missing.add(m));
    d.added.forEach((m) => added.add(m));
  }
  return { slowSpans, maxRatio, ownExcessUs, missing, added };
}

/** The pod's metric series binned by their largest deviation around the case: Medium and High ones, largest first, and the count of Low ones. */
function binnedMetrics(dataset: Dataset, pod: string, c: Case, tools: ToolSettings, s: SketchSettings) {
  const metrics: SketchMetric[] = [];
  let lowMetrics = 0;
  for (const series of dataset.metrics.series(pod)) {
    const f = measureFluctuation(series, fluctuationWindow(tools, c.timestamp_us / 1e6));
    if (!f) continue;
    const bin = binOf(f.max_deviation_sigma, s);
    if (bin === 'Low') lowMetrics++;
    else metrics.push({ metric: f.metric, sigma: f.max_deviation_sigma, bin });
  }
  metrics.sort((a, b) => Math.abs(b.sigma) - Math.abs(a.sigma));
  return { metrics, lowMetrics };
}

/** The pod's error and warning log templates around the case with their counts against the service's usual rate: unseen ones first, then by ratio and count. */
function podLogs(dataset: Dataset, pod: string, service: string, c: Case, tools: ToolSettings, s: SketchSettings): SketchLog[] {
  const halfUs = tools.log_delta_s * 1e6;
  const records = dataset.logs.query(pod, c.timestamp_us - halfUs, c.timestamp_us + halfUs, ['error', 'warn']);
  const groups = new Map<string, { templateId: number; level: LogLevel; count: number }>();
  for (const r of records) {
    const k = `${r.template_id}|${r.level}`;
    const g = groups.get(k) ?? { templateId: r.template_id, level: r.level, count: 0 };
    g.count++;
    groups.set(k, g);
  }
  const minutes = (2 * tools.log_delta_s) / 60;
  return [...groups.values()]
    .map((g) => {
      const usual = dataset.logs.baselineRate(service, g.templateId);
      const rate = g.count / minutes;
      return {
        template: dataset.logs.template(g.templateId)?.template ?? `template ${g.templateId}`,
        level: g.level,
        count: g.count,
        ...(usual ? { ratio: rate / usual } : {}),
        unseen: usual === 0,
      };
    })
    .sort((a, b) => Number(b.unseen) - Number(a.unseen) || (b.ratio ?? 0) - (a.ratio ?? 0) || b.count - a.count)
    .slice(0, s.max_templates);
}

function sketchPod(dataset: Dataset, c: Case, id: number, pod: string, own: Span[], tools: ToolSettings, s: SketchSettings): SketchPod {
  const first = own[0];
  const { slowSpans, maxRatio, ownExcessUs, missing, added } = spanFacts(dataset, own, tools);
  const { metrics, lowMetrics } = binnedMetrics(dataset, pod, c, tools, s);
  return {
    id,
    pod,
    service: first.service,
    ...(first.node ? { node: first.node } : {}),
    spans: own.length,
    slowSpans,
    ...(maxRatio !== undefined ? { maxRatio } : {}),
    ownExcessUs,
    errorSpans: own.filter((x) => x.status === 'error').length,
    missingCalls: [...missing].sort(),
    addedCalls: [...added].sort(),
    metrics,
    lowMetrics,
    logs: podLogs(dataset, pod, first.service, c, tools, s),
  };
}

/** Calls between the sketch's pods (a span whose parent runs on another pod), counted per caller and callee. */
function podEdges(dataset: Dataset, spans: Span[], ids: Map<string, number>): OraclSketch['edges'] {
  const edges = new Map<string, { from: number; to: number; calls: number }>();
  for (const sp of spans) {
    const parent = sp.parent_id === null ? undefined : dataset.traces.span(sp.parent_id);
    if (!parent || parent.pod === sp.pod) continue;
    const from = ids.get(parent.pod);
    const to = ids.get(sp.pod);
    if (from === undefined || to === undefined) continue;
    const k = `${from}>${to}`;
    const e = edges.get(k) ?? { from, to, calls: 0 };
    e.calls++;
    edges.set(k, e);
  }
  return [...edges.values()];
}

export function buildSketch(dataset: Dataset, c: Case, tools: ToolSettings, s: SketchSettings): OraclSketch {
  const spans = dataset.traces.trace(c.trace_id);
  const byPod = new Map<string, Span[]>();
  for (const sp of spans) {
    const list = byPod.get(sp.pod);
    if (list) list.push(sp);
    else byPod.set(sp.pod, [sp]);
  }
  const order = [...byPod.keys()].sort((a, b) => byPod.get(a)![0].start_us - byPod.get(b)![0].start_us);
  const kept = order.slice(0, s.max_pods);
  const ids = new Map(kept.map((p, i) => [p, i + 1]));
  const pods = kept.map((pod) => sketchPod(dataset, c, ids.get(pod)!, pod, byPod.get(pod)!, tools, s));
  return { caseId: c.id, timestampUs: c.timestamp_us, pods, edges: podEdges(dataset, spans, ids), omitted: order.length - kept.length };
}

const ms = (us: number): string => `${(us / 1000).toFixed(1)}ms`;

function podLine(p: SketchPod): string[] {
  const parts = [`${sketchId(p.id)} ${p.service} pod=${p.pod}${p.node ? ` node=${p.node}` : ''}: ${p.spans} span(s)`];
  if (p.maxRatio !== undefined) parts.push(`slowest x${p.maxRatio.toFixed(2)} of usual, ${p.slowSpans} slow`);
  parts.push(`own delay ${ms(p.ownExcessUs)}`);
  if (p.errorSpans) parts.push(`${p.errorSpans} error span(s)`);
  const lines = [parts.join('; ')];
  if (p.missingCalls.length) lines.push(`   usual calls missing: ${p.missingCalls.join('; ')}`);
  if (p.addedCalls.length) lines.push(`   unusual calls: ${p.addedCalls.join('; ')}`);
  const high = p.metrics.filter((m) => m.bin === 'High');
  const medium = p.metrics.filter((m) => m.bin === 'Medium');
  const m = (x: SketchMetric) => `${x.metric} (${x.sigma >= 0 ? '+' : ''}${x.sigma.toFixed(1)} sigma)`;
  lines.push(
    `   metrics: High ${high.length ? high.map(m).join(', ') : 'none'}; Medium ${medium.length ? medium.map(m).join(', ') : 'none'}; Low ${p.lowMetrics}`,
  );
  for (const l of p.logs) {
    const usual = l.unseen ? 'new' : l.ratio !== undefined ? `x${l.ratio.toFixed(1)} usual rate` : 'no usual rate';
    lines.push(`   log [${l.level}] x${l.count} (${usual}): ${l.template.replace(/\s+/g, ' ').slice(0, 160)}`);
  }
  return lines;
}

export function renderSketch(sk: OraclSketch): string {
  const lines = ['Call graph (caller -> callee: calls):'];
  for (const e of sk.edges) lines.push(`${sketchId(e.from)} -> ${sketchId(e.to)}: ${e.calls}`);
  lines.push('Components (metric bins by deviation from the usual band: Low, Medium, High):');
  for (const p of sk.pods) lines.push(...podLine(p));
  if (sk.omitted) lines.push(`[${sk.omitted} more pod(s) of the trace not shown]`);
  return lines.join('\n');
}
