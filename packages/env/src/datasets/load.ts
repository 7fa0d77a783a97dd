/** Dataset from its stored parts: builds the indexed stores once. */
import type { Dataset } from '../types';
import { readDatasetFiles, type DatasetFiles } from './files';
import { ContextBaseline } from './stores/baseline';
import { IndexedLogStore } from './stores/log-store';
import { IndexedMetricStore } from './stores/metric-store';
import { StaticTopology } from './stores/topology';
import { ColumnarTraceStore } from './stores/trace-store';

/** A loaded dataset; `baseline` also offers endpoint and child-presence statistics. */
export interface LoadedDataset extends Dataset {
  baseline: ContextBaseline;
  topology: StaticTopology;
}

export function datasetFromFiles(f: DatasetFiles): LoadedDataset {
  const topology = new StaticTopology(f.topology);
  const traces = new ColumnarTraceStore(f.traces, (pod) => topology.nodeOfPod(pod));
  return {
    meta: f.meta,
    traces,
    metrics: new IndexedMetricStore(f.metrics, (s) => topology.podsOf(s).map((p) => p.pod)),
    logs: new IndexedLogStore(f.logs),
    topology,
    baseline: new ContextBaseline(f.baseline, traces),
    faults: f.faults,
    cases: f.cases,
  };
}

export async function loadDataset(dir: string): Promise<LoadedDataset> {
  return datasetFromFiles(await readDatasetFiles(dir));
}
