/**
 * OpenRCA's query-level cases (microsoft/OpenRCA, used by RCAFlow): `record.csv` (the failures:
 * level, component, timestamp, datetime, reason; the column order varies by system, so columns
 * are found by name) and `query.csv` (`task_index,instruction,scoring_points`). A query asks for
 * the root causes of a number of failures in a time window; its scoring points are what
 * OpenRCA's evaluate.py grades. The telemetry of an OpenRCA system is in the AIOps layout, read by
 * the `aiops2022` importer; this reader adds the queries and their records.
 */
import { join } from 'node:path';
import { columns, numberField, readCsv, textField } from '../csv';
import { DataError } from '../errors';

export interface OpenRcaRecord {
  level: string;
  component: string;
  /** Unix seconds. */
  timestampS: number;
  /** As written (OpenRCA: UTC+8, "%Y-%m-%d %H:%M:%S"). */
  datetime: string;
  reason: string;
}

export interface OpenRcaQuery {
  /** 1-based row of query.csv. */
  id: number;
  /** task_1 .. task_7: which of time, reason, component are asked. */
  task: string;
  instruction: string;
  scoringPoints: string;
  /** Failures asked for: the number of "The N-th"/"The only" points of one kind. */
  failures: number;
  /** The window the instruction names, as written ("2021-03-04 14:30" .. "2021-03-04 15:00"); undefined when not found. */
  window?: { from: string; to: string };
}

const RECORD = ['level', 'component', 'timestamp', 'datetime', 'reason'] as const;
const QUERY = ['task_index', 'instruction', 'scoring_points'] as const;
const MONTHS = ['january', 'february', 'march', 'april', 'may', 'june', 'july', 'august', 'september', 'october', 'november', 'december'];
const WINDOW =
  /(January|February|March|April|May|June|July|August|September|October|November|December)\s+(\d{1,2}),\s*(\d{4}),?\s+(?:from\s+)?(\d{1,2}:\d{2})\s+to\s+(\d{1,2}:\d{2})/i;

const pad = (n: number) => String(n).padStart(2, '0');

export function queryWindow(instruction: string): OpenRcaQuery['window'] {
  const m = WINDOW.exec(instruction);
  if (!m) return undefined;
  const day = `${m[3]}-${pad(MONTHS.indexOf(m[1].toLowerCase()) + 1)}-${pad(Number(m[2]))}`;
  const hm = (t: string) => t.padStart(5, '0');
  return { from: `${day} ${hm(m[4])}`, to: `${day} ${hm(m[5])}` };
}

export function failureCount(scoringPoints: string): number {
  const count = (kind: RegExp) => [...scoringPoints.matchAll(kind)].length;
  return Math.max(
    count(/The (?:\d+-th|only) root cause occurrence time is/g),
    count(/The (?:\d+-th|only) predicted root cause component is/g),
    count(/The (?:\d+-th|only) predicted root cause reason is/g),
  );
}

export async function readOpenRcaRecords(file: string): Promise<OpenRcaRecord[]> {
  const out: OpenRcaRecord[] = [];
  let col: Record<(typeof RECORD)[number], number> | undefined;
  for await (const rec of readCsv(file)) {
    col ??= columns(file, rec.header, RECORD);
    out.push({
      level: textField(file, rec, col.level, 'level'),
      component: textField(file, rec, col.component, 'component'),
      timestampS: numberField(file, rec, col.timestamp, 'timestamp'),
      datetime: textField(file, rec, col.datetime, 'datetime'),
      reason: textField(file, rec, col.reason, 'reason'),
    });
  }
  return out;
}

export async function readOpenRcaQueries(file: string): Promise<OpenRcaQuery[]> {
  const out: OpenRcaQuery[] = [];
  let col: Record<(typeof QUERY)[number], number> | undefined;
  for await (const rec of readCsv(file)) {
    col ??= columns(file, rec.header, QUERY);
    const task = textField(file, rec, col.task_index, 'task_index');
    if (!/^task_[1-7]$/.test(task)) throw new DataError(file, rec.line, `task_index must be task_1 .. task_7, got '${task}'`);
    const scoringPoints = textField(file, rec, col.scoring_points, 'scoring_points');
    const failures = failureCount(scoringPoints);
    if (failures === 0) throw new DataError(file, rec.line, 'scoring_points name no time, component or reason');
    const instruction = textField(file, rec, col.instruction, 'instruction');
    const window = queryWindow(instruction);
    out.push({ id: out.length + 1, task, instruction, scoringPoints, failures, ...(window ? { window } : {}) });
  }
  return out;
}

/** Both files of one OpenRCA system directory. */
export async function readOpenRca(dir: string): Promise<{ records: OpenRcaRecord[]; queries: OpenRcaQuery[] }> {
  return { records: await readOpenRcaRecords(join(dir, 'record.csv')), queries: await readOpenRcaQueries(join(dir, 'query.csv')) };
}
