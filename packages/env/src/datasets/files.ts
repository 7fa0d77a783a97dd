/**
 * The on-disk dataset: one JSON file per part, spans in columnar form with string tables so
 * that loading is a handful of JSON.parse calls. Times are Unix microseconds (metrics: seconds).
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Case, DatasetMeta, Fault } from '../types';
import type { BaselineData } from './stores/baseline';
import type { LogData } from './stores/log-store';
import type { MetricSeriesData } from './stores/metric-store';
import type { TopologyData } from './stores/topology';
import type { TraceColumns } from './stores/trace-store';

/**
 * Bump when the layout or the meaning of a stored field changes. 3: meta.json in snake_case (issue 28);
 * 4: every other part too (cases, faults, traces, baseline, logs).
 */
export const FORMAT_VERSION = 4;

export interface DatasetFiles {
  meta: DatasetMeta;
  topology: TopologyData;
  traces: TraceColumns;
  baseline: BaselineData;
  metrics: MetricSeriesData[];
  logs: LogData;
  faults: Fault[];
  cases: Case[];
}

const PARTS: (keyof DatasetFiles)[] = ['topology', 'traces', 'baseline', 'metrics', 'logs', 'faults', 'cases', 'meta'];

/** Writes into a sibling temp dir and renames, so a reader never sees a half-written dataset. */
export async function writeDatasetFiles(dir: string, files: DatasetFiles): Promise<void> {
  const tmp = `${dir}.tmp-${process.pid}`;
  await rm(tmp, { recursive: true, force: true });
  try {
    await mkdir(tmp, { recursive: true });
    for (const part of PARTS) await writeFile(join(tmp, `${part}.json`), JSON.stringify(files[part]));
  } catch (e) {
    await rm(tmp, { recursive: true, force: true });
    throw e;
  }
  await rm(dir, { recursive: true, force: true });
  try {
    await rename(tmp, dir);
  } catch (e) {
    // A concurrent import of the same dataset renamed its copy first: keep that one.
    await rm(tmp, { recursive: true, force: true });
    if (!existsSync(join(dir, 'meta.json'))) throw e;
  }
}

export async function readMeta(dir: string): Promise<DatasetMeta> {
  return JSON.parse(await readFile(join(dir, 'meta.json'), 'utf8')) as DatasetMeta;
}

/** The format version a parsed meta.json declares; format 2 and older spelt the key formatVersion. */
export function metaFormatVersion(meta: unknown): number | undefined {
  if (meta === null || typeof meta !== 'object') return undefined;
  const m = meta as { format_version?: unknown; formatVersion?: unknown };
  const v = m.format_version ?? m.formatVersion;
  return typeof v === 'number' ? v : undefined;
}

/** Why a dataset of another format version cannot be read, and how to import it again. */
export function staleFormatMessage(dir: string, meta: DatasetMeta, version: number | undefined): string {
  const how =
    meta.format && meta.source ? `trainer-ctl import --format ${meta.format} --src ${meta.source} --out ${dir}` : 'trainer-ctl import';
  return (
    `${dir}: dataset format ${version ?? 'unknown'}, this code reads ${FORMAT_VERSION}; import it again from its source ` +
    `(${how}, or trainer-ctl train with dataset.import in the run config)`
  );
}

/** `rewrite`, when given, sees each part's JSON text before it is parsed (meta.json excepted). */
export async function readDatasetFiles(dir: string, rewrite?: (text: string) => string): Promise<DatasetFiles> {
  const meta = await readMeta(dir).catch((e: Error) => {
    throw new Error(`not a dataset directory: ${dir} (${e.message})`);
  });
  const version = metaFormatVersion(meta);
  if (version !== FORMAT_VERSION) throw new Error(staleFormatMessage(dir, meta, version));
  const parts = await Promise.all(
    PARTS.filter((p) => p !== 'meta').map(async (p) => {
      const text = await readFile(join(dir, `${p}.json`), 'utf8');
      return [p, JSON.parse(rewrite ? rewrite(text) : text)] as const;
    }),
  );
  return { meta, ...Object.fromEntries(parts) } as DatasetFiles;
}
