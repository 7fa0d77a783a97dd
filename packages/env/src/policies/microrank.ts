/**
 * Trace-spectrum baseline in the spirit of MicroRank (WWW'21) and TraceRank: around the
 * case's time, split the requests into anomalous and normal ones, weight every operation
 * by personalised PageRank over each set's trace graph, and rank operations by a weighted
 * Ochiai spectrum (covered by anomalous traces, rarely by normal ones). A pod scores its
 * best operation.
 */
import { z } from 'zod';
import type { Case, Dataset, RootCause, Span } from '../types';
import { personalizedPageRank, type TraceGraph } from './pagerank';
import { registerPolicy, type Ranker } from './registry';
import { endpointSpan, TraceTimeIndex } from './trace-math';

export const MicroRankSettingsSchema = z.strictObject({
  /** Requests whose entry starts within this many seconds of the case's entry are compared. Default 60. */
  window_s: z.number().positive().default(60),
  /**
   * A request is anomalous when its endpoint span (see endpointSpan) lasts more than k standard
   * deviations above its usual duration in the fault-free baseline (the case's own request
   * always is). Default 3.
   */
  anomaly_sigma: z.number().positive().default(3),
  /** Damping factor of PageRank. Default 0.85 (MicroRank). */
  damping: z.number().gt(0).lt(1).default(0.85),
  /** Power iterations of PageRank. Default 30. */
  iterations: z.number().int().min(1).default(30),
  /** Most requests of each set (anomalous, normal) used, the closest in time first. Default 400. */
  max_traces: z.number().int().min(1).default(400),
  /** Most components in the answer. Default 10. */
  max_answers: z.number().int().min(1).default(10),
});
export type MicroRankSettings = z.infer<typeof MicroRankSettingsSchema>;

const opKey = (s: Span): string => `${s.pod}\u0000${s.operation}`;

function graphOf(dataset: Dataset, traceIds: string[], opIndex: Map<string, number>): TraceGraph {
  const calls = new Set<string>();
  const coverage: number[][] = [];
  const idx = (s: Span): number => {
    const k = opKey(s);
    let i = opIndex.get(k);
    if (i === undefined) opIndex.set(k, (i = opIndex.size));
    return i;
  };
  for (const id of traceIds) {
    const spans = dataset.traces.trace(id);
    const ops = new Set<number>();
    for (const s of spans) {
      const o = idx(s);
      ops.add(o);
      const parent = s.parent_id ? dataset.traces.span(s.parent_id) : undefined;
      if (parent) calls.add(`${idx(parent)},${o}`);
    }
    coverage.push([...ops]);
  }
  const edges = [...calls].map((e) => e.split(',').map(Number) as [number, number]);
  return { ops: opIndex.size, calls: edges, coverage };
}

export function createMicroRankRanker(dataset: Dataset, settings: MicroRankSettings): Ranker {
  let index: TraceTimeIndex | undefined;
  const isAnomalous = (traceId: string): boolean => {
    const e = endpointSpan(dataset.traces, traceId);
    const usual = e && dataset.baseline.duration(e);
    return !!e && !!usual && e.duration_us > usual.meanUs + settings.anomaly_sigma * usual.stdUs;
  };
  return {
    rank(c: Case): RootCause[] {
      index ??= new TraceTimeIndex(dataset.traces);
      const w = settings.window_s * 1e6;
      const near = index
        .between(c.timestamp_us - w, c.timestamp_us + w)
        .filter((id) => id !== c.trace_id)
        .map((id) => ({ id, dt: Math.abs((dataset.traces.entry(id)?.start_us ?? 0) - c.timestamp_us) }))
        .sort((a, b) => a.dt - b.dt);
      const anomalous = [c.trace_id];
      const normal: string[] = [];
      for (const { id } of near) {
        const set = isAnomalous(id) ? anomalous : normal;
        if (set.length < settings.max_traces) set.push(id);
      }
      const opIndex = new Map<string, number>();
      const ga = graphOf(dataset, anomalous, opIndex);
      const gn = graphOf(dataset, normal, opIndex);
      const ops = opIndex.size;
      const pa = personalizedPageRank({ ...ga, ops }, settings.damping, settings.iterations);
      const pn = personalizedPageRank({ ...gn, ops }, settings.damping, settings.iterations);
      const ef = new Float64Array(ops);
      const ep = new Float64Array(ops);
      for (const cov of ga.coverage) for (const o of cov) ef[o]++;
      for (const cov of gn.coverage) for (const o of cov) ep[o]++;

      const best = new Map<string, number>();
      for (const [key, o] of opIndex) {
        if (!ef[o] || !pa[o]) continue;
        // Weighted Ochiai: ef*Pa / sqrt((ef+nf)*Pa * (ef*Pa + ep*Pn)), with ef+nf = |anomalous|.
        const efw = ef[o] * pa[o];
        const score = efw / Math.sqrt(anomalous.length * pa[o] * (efw + ep[o] * pn[o]));
        const pod = key.slice(0, key.indexOf('\u0000'));
        if (score > (best.get(pod) ?? -Infinity)) best.set(pod, score);
      }
      return [...best]
        .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
        .slice(0, settings.max_answers)
        .map(([pod, s]) => ({
          service: dataset.topology.serviceOfPod(pod),
          pod,
          reason: `spectrum score ${s.toFixed(3)} (${anomalous.length} anomalous vs ${normal.length} normal requests)`,
        }));
    },
  };
}

registerPolicy({
  name: 'microrank',
  kind: 'ranker',
  description: 'MicroRank-style trace spectrum weighted by personalised PageRank',
  settings: MicroRankSettingsSchema,
  create: createMicroRankRanker,
});
