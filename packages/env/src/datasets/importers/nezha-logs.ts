/**
 * Nezha logs: `Timestamp,TimeUnixNano,Node,PodName,Container,TraceID,SpanID,Log`, `Log` being
 * the container runtime's JSON with the line in `log`. Every row gives the pod's node (the
 * only pod-to-node mapping); info, warn and error lines (level as written in the text) are
 * kept, each with a masked template. Info lines stay because a usual info line that goes
 * silent is often the only sign of an exception (the statement after the throw never runs).
 */
import type { LogRecord } from '../../types';
import { columns, readCsv } from '../csv';
import { DataError } from '../errors';
import { levelInText, TemplateTable } from '../log-template';
import { serviceOfDeploymentPod } from '../names';
import { isoToUs, nsStringToUs } from '../time';

const COLS = ['Timestamp', 'TimeUnixNano', 'Node', 'PodName', 'TraceID', 'SpanID', 'Log'] as const;
/** Characters at the start of a line that hold its time and level. */
const LEVEL_SPAN = 48;

function logText(field: string): string | undefined {
  try {
    const v = (JSON.parse(field) as { log?: unknown }).log;
    return typeof v === 'string' ? v : undefined;
  } catch {
    return undefined;
  }
}

export interface NezhaLogs {
  nodeOfPod: Map<string, string>;
  templates: TemplateTable;
  records: LogRecord[];
  /** Rows whose TimeUnixNano was unusable, timed by their Timestamp instead. */
  badTimes: number;
  /** file:line of rows whose Log field is not the runtime's JSON (skipped). */
  corrupt: string[];
}

export async function readNezhaLogs(files: string[], onFile?: (file: string) => void): Promise<NezhaLogs> {
  const nodeOfPod = new Map<string, string>();
  const templates = new TemplateTable();
  const records: LogRecord[] = [];
  let badTimes = 0;
  const corrupt: string[] = [];
  for (const file of files) {
    onFile?.(file);
    let c: Record<(typeof COLS)[number], number> | undefined;
    // Node and pod come before the quoted Log field, so a cheap split of the raw row finds them.
    const keep = (raw: string) => {
      const head = raw.split(',', 4);
      if (head.length === 4 && head[2] && head[3] && head[2] !== 'Node') nodeOfPod.set(head[3], head[2]);
      return raw.includes('ERROR') || raw.includes('WARN') || raw.includes('FATAL') || raw.includes('INFO');
    };
    for await (const rec of readCsv(file, keep)) {
      c ??= columns(file, rec.header, COLS);
      const f = rec.fields;
      const message = logText(f[c.Log]);
      if (message === undefined) {
        // Interleaved writes left a few rows with two log lines spliced together: skipped, counted.
        corrupt.push(`${file}:${rec.line}`);
        continue;
      }
      const level = levelInText(message.slice(0, LEVEL_SPAN));
      if (level !== 'error' && level !== 'warn' && level !== 'info') continue;
      // Some rows carry an overflowed (negative) TimeUnixNano; their ISO Timestamp is intact.
      const tsUs = nsStringToUs(f[c.TimeUnixNano]) ?? isoToUs(f[c.Timestamp]);
      if (tsUs === undefined)
        throw new DataError(file, rec.line, `neither TimeUnixNano nor Timestamp is a time: '${f[c.TimeUnixNano]}', '${f[c.Timestamp]}'`);
      if (nsStringToUs(f[c.TimeUnixNano]) === undefined) badTimes++;
      const pod = f[c.PodName];
      const rec2: LogRecord = { ts_us: tsUs, service: serviceOfDeploymentPod(pod), pod, level, template_id: templates.idOf(message) };
      if (f[c.Node]) rec2.node = f[c.Node];
      if (f[c.TraceID]) rec2.trace_id = f[c.TraceID];
      if (f[c.SpanID]) rec2.span_id = f[c.SpanID];
      records.push(rec2);
    }
  }
  return { nodeOfPod, templates, records, badTimes, corrupt };
}
