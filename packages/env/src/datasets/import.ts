/**
 * importDataset: runs an importer, derives the fault-free baseline and the cases, and writes
 * the dataset directory.
 */
import { basename, resolve } from 'node:path';
import type { DatasetGaps, Span } from '../types';
import { deriveCases } from './cases';
import { GapsError } from './errors';
import { FORMAT_VERSION, writeDatasetFiles, type DatasetFiles } from './files';
import { importer } from './importers/index';
import { datasetFromFiles, type LoadedDataset } from './load';
import { faultGaps, gapLines, silences } from './gaps';
import { importSettings, parseSettings } from './settings';
import { computeBaseline } from './stores/baseline';
import { healthyRates } from './stores/log-store';
import type { PodInfo } from './stores/topology';
import { ColumnarTraceStore, toTraceColumns } from './stores/trace-store';
import type { Progress, Telemetry } from './telemetry';

export interface ImportOptions {
  /** Importer name: nezha, aiops2022, otlp. */
  format: string;
  src: string;
  out: string;
  /** `{ importer: {...}, cases: {...}, gaps: {...} }`, validated by zod (importSettings) before anything is read. */
  settings?: unknown;
  /** Every gap is an error (GapsError, nothing written) instead of a warning kept in meta.json. */
  strict?: boolean;
  onProgress?: Progress;
}

/** Spans of requests that start outside every fault window: the baseline when no fault-free data exists. */
function outsideFaults(t: Telemetry): Span[] {
  const entryStart = new Map<string, number>();
  for (const s of t.spans) if (s.parent_id === null) entryStart.set(s.trace_id, s.start_us);
  return t.spans.filter((s) => {
    const at = entryStart.get(s.trace_id);
    return at !== undefined && !t.faults.some((f) => at >= f.start_us && at <= f.end_us);
  });
}

function topologyOf(t: Telemetry) {
  const pods = new Map<string, PodInfo>(t.pods.map((p) => [p.pod, p]));
  for (const s of t.spans) if (!pods.has(s.pod)) pods.set(s.pod, { pod: s.pod, service: s.service, ...(s.node ? { node: s.node } : {}) });
  const services = new Set([...pods.values()].map((p) => p.service));
  const nodes = new Set<string>();
  for (const p of pods.values()) if (p.node) nodes.add(p.node);
  for (const m of t.metrics) {
    if (m.level === 'service') services.add(m.component);
    if (m.level === 'node') nodes.add(m.component);
  }
  for (const f of t.faults) if (f.truth.node) nodes.add(f.truth.node);
  const byName = (a: PodInfo, b: PodInfo) => (a.pod < b.pod ? -1 : 1);
  return { services: [...services].sort(), pods: [...pods.values()].sort(byName), nodes: [...nodes].sort() };
}

export async function importDataset(opts: ImportOptions): Promise<LoadedDataset> {
  const progress = opts.onProgress ?? (() => {});
  const imp = importer(opts.format);
  const settings = parseSettings(importSettings(imp.settings), opts.settings, '');
  const { importer: importerSettings, cases: caseSettings, gaps: gapSettings } = settings;
  const t = await imp.import(resolve(opts.src), importerSettings, progress);

  progress(`indexing ${t.spans.length} spans`);
  const topology = topologyOf(t);
  const baselineTraces = new ColumnarTraceStore(toTraceColumns(t.baselineSpans.length ? t.baselineSpans : outsideFaults(t)));
  progress(`baseline from ${baselineTraces.size} fault-free spans`);
  const coverage = t.gaps?.traces ?? silences(t.spans, gapSettings.max_silence_sec * 1e6);
  const gaps: DatasetGaps = {
    ...(t.gaps?.baseline
      ? {
          baseline: {
            missing: t.gaps.baseline,
            fallback: `the ${baselineTraces.size} spans of requests that start outside every fault window`,
          },
        }
      : {}),
    traces: coverage.missing,
    logs: t.gaps?.logs ?? [],
    parts: t.gaps?.parts ?? [],
    faults: [],
  };
  const windows = t.faults.map((f) => ({ startUs: f.start_us, endUs: f.end_us, service: f.truth.service }));
  const files: DatasetFiles = {
    meta: {
      name: basename(resolve(opts.out)),
      format: imp.name,
      format_version: FORMAT_VERSION,
      source: resolve(opts.src),
      created_at: new Date().toISOString(),
      settings,
      gaps,
      ...(t.frontend ? { frontend: t.frontend } : {}),
    },
    topology,
    traces: toTraceColumns(t.spans),
    baseline: computeBaseline(baselineTraces, caseSettings.anomaly.min_baseline_count),
    metrics: t.metrics,
    logs: { ...t.logs, rates: healthyRates(t.logs.records, windows, topology.services) },
    faults: [],
    cases: [],
  };
  const dataset = datasetFromFiles(files);
  progress(`deriving cases for ${t.faults.length} faults`);
  const { faults, cases, flagged } = deriveCases(t.faults, dataset.traces, dataset.baseline, caseSettings);
  files.faults = dataset.faults = faults;
  files.cases = dataset.cases = cases;
  gaps.faults = faultGaps(faults, flagged, caseSettings.max_cases_per_fault, coverage);
  const lines = gapLines(gaps);
  if (opts.strict && lines.length) throw new GapsError(lines);
  progress(`writing ${opts.out}`);
  await writeDatasetFiles(resolve(opts.out), files);
  return dataset;
}
