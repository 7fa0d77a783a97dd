/** Dataset from its stored parts: builds the indexed stores once, logs and metrics when first asked. */
import type { Dataset } from '../types';
import { openDatasetFiles, type DatasetFiles, type DeferredFile, type EagerParts } from './files';
import { ContextBaseline } from './stores/baseline';
import { LazyLogStore, LazyMetricStore } from './stores/lazy';
import { IndexedLogStore } from './stores/log-store';
import { IndexedMetricStore } from './stores/metric-store';
import { StaticTopology } from './stores/topology';
import { ColumnarTraceStore } from './stores/trace-store';

/** A loaded dataset; `baseline` also offers endpoint and child-presence statistics. */
export interface LoadedDataset extends Dataset {
  baseline: ContextBaseline;
  topology: StaticTopology;
}

function datasetFrom(f: EagerParts, logs: DeferredFile<'logs'>, metrics: DeferredFile<'metrics'>): LoadedDataset {
  const topology = new StaticTopology(f.topology);
  const traces = new ColumnarTraceStore(f.traces, (pod) => topology.nodeOfPod(pod));
  return {
    meta: f.meta,
    traces,
    metrics: new LazyMetricStore(() => new IndexedMetricStore(metrics(), (s) => topology.podsOf(s).map((p) => p.pod))),
    logs: new LazyLogStore(() => new IndexedLogStore(logs())),
    topology,
    baseline: new ContextBaseline(f.baseline, traces),
    faults: f.faults,
    cases: f.cases,
  };
}

export function datasetFromFiles(f: DatasetFiles): LoadedDataset {
  return datasetFrom(
    f,
    () => f.logs,
    () => f.metrics,
  );
}

/**
 * The dataset in `dir`. A missing or unreadable part fails here, naming its file; logs.json and
 * metrics.json are parsed when their store is first asked (from the files opened here, so a
 * re-import meanwhile does not mix two imports). `rewrite` sees each part's text before it is parsed.
 */
export async function loadDataset(dir: string, rewrite?: (text: string) => string): Promise<LoadedDataset> {
  const { files, deferred } = await openDatasetFiles(dir, rewrite);
  return datasetFrom(files, deferred.logs, deferred.metrics);
}
