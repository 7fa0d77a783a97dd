/**
 * The Nezha layout of one day, checked before anything is read. Required parts (the fault list,
 * the fault day's traces and metrics) missing are LayoutErrors saying what the format keeps
 * there; optional parts missing are gaps: the fault-free traces (the baseline falls back),
 * the logs, front_service.csv. Every minute is recorded as trace/HH_MM_trace.csv,
 * traceid/HH_MM_traceid.csv (its trace ids) and log/HH_MM_log.csv; a minute that one of them
 * names and trace/ or log/ lacks is a missing minute. File HH_MM holds about HH:MM-1 to HH:MM.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { TimeGap } from '../../types';
import { LayoutError } from '../errors';
import type { Interval, SourceGaps } from '../gaps';
import type { NezhaTree } from './nezha-source';

const KEEPS = {
  faults:
    "the Nezha layout keeps the day's injected faults there: a JSON map hour -> [{inject_time, inject_timestamp, inject_pod, inject_type}]",
  trace:
    'the Nezha layout keeps the traces of the fault day there, one CSV per minute: HH_MM_trace.csv with ' +
    'TraceID,SpanID,ParentID,PodName,OperationName,StartTimeUnixNano,EndTimeUnixNano,Duration',
  metric:
    'the Nezha layout keeps the metrics there: one CSV per pod, <pod>_metric.csv (a row per minute: CPU, memory, ' +
    'syscalls, network, latency percentiles, Node* columns of its node), and front_service.csv for the whole front-end',
};

const MINUTE_FILE = /^(\d\d)_(\d\d)_(trace|traceid|log)\.csv$/;

/** Minute-of-day -> file, for the files of `dir` named HH_MM_<kind>.csv. */
function minutes(dir: string, kind: string): Map<number, string> {
  const out = new Map<number, string>();
  if (!isDir(dir)) return out;
  for (const name of readdirSync(dir)) {
    const m = MINUTE_FILE.exec(name);
    if (m && m[3] === kind) out.set(Number(m[1]) * 60 + Number(m[2]), join(dir, name));
  }
  return out;
}

function isDir(p: string): boolean {
  return existsSync(p) && statSync(p).isDirectory();
}

function csvIn(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.csv'))
    .sort()
    .map((f) => join(dir, f));
}

const pad = (n: number) => String(n).padStart(2, '0');
const minuteName = (m: number) => `${pad(Math.floor(m / 60))}_${pad(m % 60)}`;

export interface NezhaLayout {
  faultList: string;
  traceFiles: string[];
  /** construct_data trace files; empty when the fault-free traces are missing (a gap). */
  baselineFiles: string[];
  metricFiles: string[];
  /** log files to read; empty when logs are off or missing (a gap). */
  logFiles: string[];
  gaps: Required<Pick<SourceGaps, 'traces' | 'logs' | 'parts'>> & Pick<SourceGaps, 'baseline'>;
}

/** Missing minutes of `have`, merged into runs of consecutive minutes; `requests` when the traceid index lists every one. */
function missingRuns(
  dayUs: number,
  index: number[],
  have: Map<number, string>,
  dir: string,
  kind: string,
  show: (path: string) => string,
  traceids: Map<number, string>,
  counted: boolean,
): TimeGap[] {
  const out: TimeGap[] = [];
  let run: { first: number; last: number; files: string[]; requests: number | undefined } | undefined;
  const close = () => {
    if (!run) return;
    out.push({
      from_us: dayUs + (run.first - 1) * 60e6,
      to_us: dayUs + run.last * 60e6,
      what: run.files.length === 1 ? show(join(dir, run.files[0])) : `${show(dir)}: ${run.files.join(', ')}`,
      ...(counted && run.requests !== undefined ? { requests: run.requests } : {}),
    });
    run = undefined;
  };
  for (const m of index) {
    if (have.has(m)) continue;
    if (run && m !== run.last + 1) close();
    run ??= { first: m, last: m, files: [], requests: 0 };
    run.last = m;
    run.files.push(`${minuteName(m)}_${kind}.csv`);
    const ids = traceids.get(m);
    run.requests =
      ids && run.requests !== undefined
        ? run.requests +
          readFileSync(ids, 'utf8')
            .split('\n')
            .filter((l) => l.trim()).length
        : undefined;
  }
  close();
  return out;
}

export function nezhaLayout(tree: NezhaTree, date: string, withLogs: boolean): NezhaLayout {
  const faultList = join(tree.rca, `${date}-fault_list.json`);
  if (!existsSync(faultList)) throw new LayoutError(tree.show(faultList), 'is missing', KEEPS.faults);
  const traceDir = join(tree.rca, 'trace');
  if (!isDir(traceDir)) throw new LayoutError(tree.show(traceDir), 'is missing', KEEPS.trace);
  const traceFiles = csvIn(traceDir);
  if (!traceFiles.length) throw new LayoutError(tree.show(traceDir), 'holds no CSV file', KEEPS.trace);
  const metricDir = join(tree.rca, 'metric');
  if (!isDir(metricDir)) throw new LayoutError(tree.show(metricDir), 'is missing', KEEPS.metric);
  const metricFiles = csvIn(metricDir);
  if (!metricFiles.length) throw new LayoutError(tree.show(metricDir), 'holds no CSV file', KEEPS.metric);

  const parts: string[] = [];
  let baseline: string | undefined;
  const constructDir = join(tree.construct, 'trace');
  const baselineFiles = isDir(constructDir) ? csvIn(constructDir) : [];
  if (!baselineFiles.length) {
    const problem = isDir(constructDir) ? 'holds no trace file' : 'is missing';
    baseline = `${tree.show(constructDir)} ${problem} (the Nezha layout keeps the fault-free traces of the day there, HH_MM_trace.csv)`;
  }
  if (!metricFiles.some((f) => f.endsWith('/front_service.csv'))) {
    parts.push(
      `${tree.show(join(metricDir, 'front_service.csv'))} is missing: the dataset has no front-end-wide success rate and latency series`,
    );
  }

  // The published data archive holds an empty log/ folder: logs are there only with files in it.
  const logDir = join(tree.rca, 'log');
  const logFiles = withLogs && isDir(logDir) ? csvIn(logDir) : [];
  const logsThere = logFiles.length > 0;
  if (withLogs && !logsThere) {
    const where = existsSync(tree.logsSource) ? `${tree.show(tree.logsSource)} holds no log file` : `${tree.logsSource} not found`;
    parts.push(`logs missing: ${where}; the dataset has no logs (set importer.logs: false to leave them out on purpose)`);
  }
  const traceidDir = join(tree.rca, 'traceid');
  if (!isDir(traceidDir)) {
    parts.push(
      `${tree.show(traceidDir)} is missing (the Nezha layout keeps each minute's trace ids there, HH_MM_traceid.csv): ` +
        `minutes missing from trace/ are found from ${logsThere ? 'log/ alone' : 'nothing else, so they are not checked'}`,
    );
  }

  const dayUs = Date.parse(`${date}T00:00:00Z`) * 1000;
  const traceMin = minutes(traceDir, 'trace');
  const logMin = logsThere ? minutes(logDir, 'log') : new Map<number, string>();
  const traceids = minutes(traceidDir, 'traceid');
  const index = [...new Set([...traceMin.keys(), ...traceids.keys(), ...logMin.keys()])].sort((a, b) => a - b);
  const recorded: Interval[] = [...traceMin.keys()].map((m) => ({ from_us: dayUs + (m - 1) * 60e6, to_us: dayUs + m * 60e6 }));
  return {
    faultList,
    traceFiles,
    baselineFiles,
    metricFiles,
    logFiles,
    gaps: {
      ...(baseline ? { baseline } : {}),
      traces: { recorded, missing: missingRuns(dayUs, index, traceMin, traceDir, 'trace', tree.show, traceids, traceids.size > 0) },
      logs: logsThere ? missingRuns(dayUs, index, logMin, logDir, 'log', tree.show, traceids, false) : [],
      parts,
    },
  };
}
