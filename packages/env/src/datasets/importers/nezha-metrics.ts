/**
 * Nezha metrics: `metric/<pod>_metric.csv` has one row per pod per minute; its columns are the
 * pod's, except the Node* columns, which describe the pod's node and are kept once per node
 * (from the first logging pod by name). Pods on one node carry the same Node* values (scraped at
 * slightly different seconds), which places the pods that never log (the logs are the only
 * explicit pod-to-node mapping) on the node of the logging pods they match; a pod whose node
 * stays unknown keeps its Node* series.
 * `front_service.csv` measures the whole front-end ('Frontend'); it is attached, as
 * service-level series, to the front-end service (set, or the service of the entry spans).
 */
import { basename } from 'node:path';
import type { Level } from '../../types';
import { columns, numberField, readCsv } from '../csv';
import { DataError } from '../errors';
import { seriesData, type MetricSeriesData } from '../stores/metric-store';

type Points = Map<string, [number, number][]>;

/** Column name -> points of one CSV file (Time and the name column skipped). */
async function readTable(file: string, skip: string[]): Promise<Points> {
  const acc: Points = new Map();
  let ts: number | undefined;
  for await (const rec of readCsv(file)) {
    ts ??= columns(file, rec.header, ['TimeStamp'] as const).TimeStamp;
    const t = numberField(file, rec, ts, 'TimeStamp');
    rec.header.forEach((name, i) => {
      if (i === ts || skip.includes(name)) return;
      const raw = rec.fields[i];
      // An idle pod's latency percentiles are written as NaN: no point, not an error.
      if (raw === undefined || raw === '' || raw === 'NaN') return;
      const v = Number(raw);
      if (!Number.isFinite(v)) throw new DataError(file, rec.line, `${name} is not a number: '${raw}'`);
      const list = acc.get(name) ?? acc.set(name, []).get(name)!;
      list.push([t, v]);
    });
  }
  return acc;
}

/** Share of equal values, row by row, over the Node* columns of two pods (scrape seconds differ). */
function sameNodeShare(a: Points, b: Points): number {
  let equal = 0;
  let total = 0;
  for (const [col, pa] of a) {
    const pb = b.get(col);
    if (!col.startsWith('Node') || !pb) continue;
    const n = Math.min(pa.length, pb.length);
    for (let i = 0; i < n; i++) if (pa[i][1] === pb[i][1]) equal++;
    total += Math.max(pa.length, pb.length);
  }
  return total ? equal / total : 0;
}

/** A pod that never logs goes on the node of the logging pods whose Node* series it shares (>= 95% equal). */
function placeByNodeSeries(pods: Map<string, Points>, logNodes: Map<string, string>) {
  const nodeOfPod = new Map(logNodes);
  const inferred: string[] = [];
  for (const [pod, points] of pods) {
    if (logNodes.has(pod)) continue;
    const nodes = new Set<string>();
    for (const [other, node] of logNodes) {
      const op = pods.get(other);
      if (op && sameNodeShare(points, op) >= 0.95) nodes.add(node);
    }
    if (nodes.size === 1) {
      nodeOfPod.set(pod, [...nodes][0]);
      inferred.push(pod);
    }
  }
  return { nodeOfPod, inferred: inferred.sort() };
}

export interface NezhaMetrics {
  series: MetricSeriesData[];
  /** Pod -> node: the logs' mapping, completed from identical Node* series. */
  nodeOfPod: Map<string, string>;
  /** Pods placed on a node by their Node* series. */
  inferred: string[];
}

export async function readNezhaMetrics(
  files: string[],
  frontendService: string | undefined,
  logNodes: Map<string, string>,
): Promise<NezhaMetrics> {
  const series: MetricSeriesData[] = [];
  const pods = new Map<string, Points>();
  for (const file of files) {
    const name = basename(file);
    if (name === 'front_service.csv' && frontendService !== undefined) {
      for (const [col, pts] of await readTable(file, ['Time', 'ServiceName']))
        series.push(seriesData(frontendService, 'service', col, pts));
      continue;
    }
    const m = /^(.+)_metric\.csv$/.exec(name);
    if (m) pods.set(m[1], await readTable(file, ['Time', 'PodName']));
  }
  const { nodeOfPod, inferred } = placeByNodeSeries(pods, logNodes);
  const nodesDone = new Set<string>();
  const logging = (p: string) => (logNodes.has(p) ? 0 : 1);
  for (const pod of [...pods.keys()].sort((a, b) => logging(a) - logging(b) || (a < b ? -1 : 1))) {
    const node = nodeOfPod.get(pod);
    const fresh = node !== undefined && !nodesDone.has(node);
    if (node) nodesDone.add(node);
    for (const [col, pts] of pods.get(pod)!) {
      let at: { component: string; level: Level } | undefined = { component: pod, level: 'pod' };
      if (col.startsWith('Node') && node !== undefined) at = fresh ? { component: node, level: 'node' } : undefined;
      if (at) series.push(seriesData(at.component, at.level, col, pts));
    }
  }
  return { series, nodeOfPod, inferred };
}
