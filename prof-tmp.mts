import { readDatasetFiles } from './packages/env/src/datasets/files';
import { ColumnarTraceStore } from './packages/env/src/datasets/stores/trace-store';
import { IndexedLogStore } from './packages/env/src/datasets/stores/log-store';
import { IndexedMetricStore } from './packages/env/src/datasets/stores/metric-store';
import { StaticTopology } from './packages/env/src/datasets/stores/topology';
import { ContextBaseline } from './packages/env/src/datasets/stores/baseline';
const dir = '.cache/datasets/nezha-2023-01-29';
for (let r = 0; r < 3; r++) {
  const f = await readDatasetFiles(dir);
  const t = (l: string, fn: () => unknown) => { const a = performance.now(); const v = fn(); console.log(l, (performance.now() - a).toFixed(0)); return v; };
  const topo = t('topo', () => new StaticTopology(f.topology)) as StaticTopology;
  const tr = t('traces', () => new ColumnarTraceStore(f.traces, (p) => topo.nodeOfPod(p))) as ColumnarTraceStore;
  t('metrics', () => new IndexedMetricStore(f.metrics, (s) => topo.podsOf(s).map((p) => p.pod)));
  t('logs', () => new IndexedLogStore(f.logs));
  t('baseline', () => new ContextBaseline(f.baseline, tr));
}
