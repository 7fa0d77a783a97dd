/**
 * Nezha metrics: `metric/<pod>_metric.csv` has one row per pod per minute; its columns are the
 * pod's, except the Node* columns, which describe the pod's node (kept once per node, from the
 * first pod by name; they stay with the pod when its node is unknown). `front_service.csv`
 * measures the whole frontend ('Frontend'); it is attached, as service-level series, to the
 * configured frontend service (ts-ui-dashboard, the nginx in front of the gateway).
 */
import { basename } from 'node:path';
import type { Level } from '../../types';
import { columns, numberField, readCsv } from '../csv';
import { DataError } from '../errors';
import { seriesData, type MetricSeriesData } from '../stores/metric-store';
import { csvFiles } from './nezha-spans';

type Points = Map<string, { component: string; level: Level; name: string; points: [number, number][] }>;

async function readTable(file: string, skip: string[], target: (column: string) => { component: string; level: Level } | undefined, acc: Points) {
  let ts: number | undefined;
  for await (const rec of readCsv(file)) {
    ts ??= columns(file, rec.header, ['TimeStamp'] as const).TimeStamp;
    const t = numberField(file, rec, ts, 'TimeStamp');
    rec.header.forEach((name, i) => {
      if (i === ts || skip.includes(name)) return;
      const to = target(name);
      const raw = rec.fields[i];
      // An idle pod's latency percentiles are written as NaN: no point, not an error.
      if (!to || raw === undefined || raw === '' || raw === 'NaN') return;
      const v = Number(raw);
      if (!Number.isFinite(v)) throw new DataError(file, rec.line, `${name} is not a number: '${raw}'`);
      const key = `${to.component}\u0000${name}`;
      let s = acc.get(key);
      if (!s) acc.set(key, (s = { ...to, name, points: [] }));
      s.points.push([t, v]);
    });
  }
}

export async function readNezhaMetrics(
  dir: string,
  frontendService: string,
  nodeOfPod: (pod: string) => string | undefined,
): Promise<MetricSeriesData[]> {
  const acc: Points = new Map();
  const nodesDone = new Set<string>();
  for (const file of csvFiles(dir)) {
    const name = basename(file);
    if (name === 'front_service.csv') {
      await readTable(file, ['Time', 'ServiceName'], () => ({ component: frontendService, level: 'service' }), acc);
      continue;
    }
    const m = /^(.+)_metric\.csv$/.exec(name);
    if (!m) continue;
    const pod = m[1];
    const node = nodeOfPod(pod);
    const nodeFresh = node !== undefined && !nodesDone.has(node);
    if (node) nodesDone.add(node);
    await readTable(
      file,
      ['Time', 'PodName'],
      (col) => {
        if (!col.startsWith('Node')) return { component: pod, level: 'pod' };
        if (node === undefined) return { component: pod, level: 'pod' };
        return nodeFresh ? { component: node, level: 'node' } : undefined;
      },
      acc,
    );
  }
  return [...acc.values()].map((s) => seriesData(s.component, s.level, s.name, s.points));
}
