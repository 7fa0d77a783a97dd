/**
 * The on-disk dataset: one JSON file per part, spans in columnar form with string tables so
 * that loading is a handful of JSON.parse calls. Times are Unix microseconds (metrics: seconds).
 */
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { mkdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Case, DatasetMeta, Fault } from '../types';
import { parseJson } from './json';
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

/** Parts that are read from disk only when a store first asks (load.ts): the rest is small or read by every episode. */
export type DeferredPart = 'logs' | 'metrics';
export type EagerParts = Omit<DatasetFiles, DeferredPart>;

/** A part held open from load and parsed at its first read: the bytes of the dataset that was loaded, even if it is re-imported meanwhile. */
export type DeferredFile<P extends DeferredPart> = () => DatasetFiles[P];

const DEFERRED: DeferredPart[] = ['logs', 'metrics'];

/**
 * Reads every part but logs and metrics, which are opened now (a missing or unreadable one fails
 * here, naming its file) and parsed when their function is first called; a syntax error names file
 * and line either way.
 */
export async function openDatasetFiles(
  dir: string,
  rewrite?: (text: string) => string,
): Promise<{ files: EagerParts; deferred: { [P in DeferredPart]: DeferredFile<P> } }> {
  const meta = await readMeta(dir).catch((e: Error) => {
    throw new Error(`not a dataset directory: ${dir} (${e.message})`);
  });
  const version = metaFormatVersion(meta);
  if (version !== FORMAT_VERSION) throw new Error(staleFormatMessage(dir, meta, version));
  const parse = (file: string, text: string) => parseJson(file, rewrite ? rewrite(text) : text);
  const fds = openAll(DEFERRED.map((p) => join(dir, `${p}.json`)));
  const deferred = Object.fromEntries(DEFERRED.map((p, i) => [p, deferredPart(join(dir, `${p}.json`), fds[i], parse)]));
  const eager = PARTS.filter((p) => p !== 'meta' && !DEFERRED.includes(p as DeferredPart));
  const parts = await Promise.all(
    eager.map(async (p) => {
      const file = join(dir, `${p}.json`);
      return [p, parse(file, await readFile(file, 'utf8'))] as const;
    }),
  ).catch((e: unknown) => {
    for (const fd of fds) closeSync(fd);
    throw e;
  });
  return {
    files: { meta, ...Object.fromEntries(parts) } as EagerParts,
    deferred: deferred as { [P in DeferredPart]: DeferredFile<P> },
  };
}

/** Closes the file of a deferred part whose dataset was dropped unread (a process that loads many keeps no descriptors). */
const unreadParts = new FinalizationRegistry<number>((fd) => closeSync(fd));

/** Parsed at the first call; a failed read or parse fails every call alike (the file is closed either way). */
function deferredPart<T>(file: string, fd: number, parse: (file: string, text: string) => unknown): () => T {
  let done: { value: T } | { error: unknown } | undefined;
  const read = (): T => {
    if (done === undefined) {
      unreadParts.unregister(read);
      try {
        done = { value: parse(file, readFileSync(fd, 'utf8')) as T };
      } catch (error) {
        done = { error };
      } finally {
        closeSync(fd);
      }
    }
    if ('error' in done) throw done.error;
    return done.value;
  };
  unreadParts.register(read, fd, read);
  return read;
}

function openAll(files: string[]): number[] {
  const fds: number[] = [];
  try {
    for (const f of files) fds.push(openSync(f, 'r'));
  } catch (e) {
    for (const fd of fds) closeSync(fd);
    throw e;
  }
  return fds;
}
