/**
 * Nezha trace CSVs: `TraceID,SpanID,ParentID,PodName,OperationName,StartTimeUnixNano,
 * EndTimeUnixNano,Duration`. Start/end are Unix ns (cut to µs as strings), Duration is µs;
 * ParentID `root` marks the entry span. There is no status column.
 */
import type { Span } from '../../types';
import { columns, numberField, readCsv, textField } from '../csv';
import { DataError } from '../errors';
import { serviceOfDeploymentPod } from '../names';
import { nsStringToUs } from '../time';

const COLS = ['TraceID', 'SpanID', 'ParentID', 'PodName', 'OperationName', 'StartTimeUnixNano', 'EndTimeUnixNano', 'Duration'] as const;

export async function readNezhaSpans(file: string, out: Span[]): Promise<void> {
  let c: Record<(typeof COLS)[number], number> | undefined;
  for await (const rec of readCsv(file)) {
    c ??= columns(file, rec.header, COLS);
    const f = rec.fields;
    const startUs = nsStringToUs(f[c.StartTimeUnixNano]);
    if (startUs === undefined) throw new DataError(file, rec.line, `StartTimeUnixNano is not Unix ns: '${f[c.StartTimeUnixNano]}'`);
    const durationUs = numberField(file, rec, c.Duration, 'Duration');
    const pod = textField(file, rec, c.PodName, 'PodName');
    const parent = textField(file, rec, c.ParentID, 'ParentID');
    out.push({
      trace_id: textField(file, rec, c.TraceID, 'TraceID'),
      span_id: textField(file, rec, c.SpanID, 'SpanID'),
      parent_id: parent === 'root' ? null : parent,
      service: serviceOfDeploymentPod(pod),
      pod,
      operation: f[c.OperationName],
      start_us: startUs,
      duration_us: durationUs,
      status: 'unset',
    });
  }
}
