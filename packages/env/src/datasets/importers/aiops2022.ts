/**
 * AIOps Challenge 2022 / OpenRCA layout. CSV files anywhere under the source are recognised by
 * their header: spans `timestamp,cmdb_id,span_id,trace_id,duration,type,status_code,
 * operation_name,parent_span`; metrics `timestamp,cmdb_id,kpi_name,value`; ground truth
 * `timestamp,level,cmdb_id,failure_type`. Timestamps are s or ms (detected per value),
 * durations ms. A cmdb_id is a pod (`frontend-0`), a service (`frontend`), a node (`node-1`),
 * or `node.pod` in container metrics (which also tells the pod's node).
 */
import { closeSync, openSync, readSync } from 'node:fs';
import { relative } from 'node:path';
import { z } from 'zod';
import type { Level, Span } from '../../types';
import type { FaultDraft } from '../cases';
import { columns, numberField, readCsv, textField, type CsvRecord } from '../csv';
import { DataError, LayoutError, SettingsError } from '../errors';
import { serviceOfOrdinalPod } from '../names';
import { seriesData } from '../stores/metric-store';
import type { Importer } from '../telemetry';
import { epochToUs, isoUs } from '../time';
import { sourceDir, walkFiles } from './walk';

export const Aiops2022Settings = z
  .object({
    /** Length of a fault window after its ground-truth timestamp, in seconds. Default 600. */
    fault_window_sec: z
      .number()
      .positive()
      .default(600)
      .describe('Length of a fault window after its ground-truth timestamp, in seconds. Default 600.'),
    /** Regular expression a cmdb_id matches when it names a node. Default ^node-\d+$. */
    node_pattern: z
      .string()
      .default('^node-\\d+$')
      .describe('Regular expression a cmdb_id matches when it names a node. Default ^node-\\d+$.'),
  })
  .strict();

const SPAN = ['timestamp', 'cmdb_id', 'span_id', 'trace_id', 'duration', 'status_code', 'operation_name', 'parent_span'] as const;
const METRIC = ['timestamp', 'cmdb_id', 'kpi_name', 'value'] as const;
const TRUTH = ['timestamp', 'level', 'cmdb_id', 'failure_type'] as const;

/** 0, OK and HTTP 1xx-3xx are success; empty is unknown; anything else an error. */
export function statusOf(code: string): Span['status'] {
  const c = code.trim();
  if (c === '') return 'unset';
  if (/^(0|ok|status_code_ok|[123]\d\d)$/i.test(c)) return 'ok';
  return 'error';
}

function timeUs(file: string, rec: CsvRecord, i: number): number {
  const us = epochToUs(rec.fields[i] ?? '');
  if (us === undefined) throw new DataError(file, rec.line, `timestamp is not a Unix time: '${rec.fields[i] ?? ''}'`);
  return us;
}

type Kind = 'span' | 'metric' | 'truth';
const TABLES: Record<Kind, string> = {
  span: `spans (${SPAN.join(',')})`,
  metric: `metrics (${METRIC.join(',')})`,
  truth: `ground truth (${TRUTH.join(',')})`,
};

/** First line of a file (at most 64 KiB are read). */
function firstLine(file: string): string {
  const fd = openSync(file, 'r');
  try {
    const buf = Buffer.alloc(65536);
    const n = readSync(fd, buf, 0, buf.length, 0);
    return buf.toString('utf8', 0, n).split(/\r?\n/)[0];
  } catch {
    return '';
  } finally {
    closeSync(fd);
  }
}

/** Which table a CSV holds, by a column only that table has. */
function kindOf(header: string): Kind | undefined {
  const names = header.split(',').map((x) => x.trim().replace(/^\uFEFF/, ''));
  return names.includes('span_id') ? 'span' : names.includes('kpi_name') ? 'metric' : names.includes('failure_type') ? 'truth' : undefined;
}

/**
 * Sorts the source's CSVs by table before anything is read. Spans and ground truth are
 * required; when one is absent, a CSV whose header matches no table is named at its line 1
 * (a damaged header), else the layout error says what the format keeps.
 */
function layout(src: string): { files: { file: string; kind: Kind }[]; parts: string[] } {
  const files: { file: string; kind: Kind }[] = [];
  const unknown: string[] = [];
  for (const file of walkFiles(src, (n) => n.endsWith('.csv'))) {
    const kind = kindOf(firstLine(file));
    if (kind) files.push({ file, kind });
    else unknown.push(file);
  }
  for (const kind of ['span', 'truth'] as const) {
    if (files.some((f) => f.kind === kind)) continue;
    const known = Object.values(TABLES).join('; ');
    if (unknown.length) {
      throw new DataError(
        unknown[0],
        1,
        `header matches no table of the aiops2022 layout (${known}), and the source has no ${TABLES[kind]}`,
      );
    }
    const keeps = `the aiops2022 layout keeps spans, metrics and ground truth in CSV files anywhere under it, told apart by their headers (${known})`;
    throw new LayoutError(src, `holds no CSV of ${TABLES[kind]}`, keeps);
  }
  const parts = unknown.map((f) => `${relative(src, f)} ignored: its header matches no table of the aiops2022 layout`);
  if (!files.some((f) => f.kind === 'metric')) parts.push(`no CSV of ${TABLES.metric} under ${src}: the dataset has no metrics`);
  return { files, parts };
}

function nodeRegExp(pattern: string): RegExp {
  try {
    return new RegExp(pattern);
  } catch (e) {
    throw new SettingsError(`importer.node_pattern: ${(e as Error).message}`);
  }
}

type Column<T extends readonly string[]> = T[number];
interface MetricPoints {
  component: string;
  level: Level;
  name: string;
  points: [number, number][];
}

function spanOf(file: string, rec: CsvRecord, c: Record<Column<typeof SPAN>, number>): Span {
  const pod = textField(file, rec, c.cmdb_id, 'cmdb_id');
  const parent = rec.fields[c.parent_span] ?? '';
  const code = rec.fields[c.status_code] ?? '';
  return {
    trace_id: textField(file, rec, c.trace_id, 'trace_id'),
    span_id: textField(file, rec, c.span_id, 'span_id'),
    parent_id: parent === '' || parent === 'root' ? null : parent,
    service: serviceOfOrdinalPod(pod),
    pod,
    operation: rec.fields[c.operation_name] ?? '',
    start_us: timeUs(file, rec, c.timestamp),
    duration_us: Math.round(numberField(file, rec, c.duration, 'duration') * 1000),
    status: statusOf(code),
    ...(code ? { status_code: code } : {}),
  };
}

/** Adds a metric row to its series; a "node.pod" id names the pod's node (nodeOfPod). */
function addMetricPoint(
  file: string,
  rec: CsvRecord,
  c: Record<Column<typeof METRIC>, number>,
  isNode: RegExp,
  points: Map<string, MetricPoints>,
  nodeOfPod: Map<string, string>,
): void {
  const id = textField(file, rec, c.cmdb_id, 'cmdb_id');
  const dot = id.indexOf('.');
  let component = id;
  let level: Level = isNode.test(id) ? 'node' : /-\d+$/.test(id) ? 'pod' : 'service';
  if (dot > 0) {
    component = id.slice(dot + 1);
    level = 'pod';
    nodeOfPod.set(component, id.slice(0, dot));
  }
  const name = textField(file, rec, c.kpi_name, 'kpi_name');
  const key = `${component}\u0000${name}`;
  let series = points.get(key);
  if (!series) points.set(key, (series = { component, level, name, points: [] }));
  series.points.push([timeUs(file, rec, c.timestamp) / 1e6, numberField(file, rec, c.value, 'value')]);
}

function faultOf(
  file: string,
  rec: CsvRecord,
  c: Record<Column<typeof TRUTH>, number>,
  nodeOfPod: Map<string, string>,
  faultWindowSec: number,
): FaultDraft {
  const level = rec.fields[c.level];
  if (level !== 'service' && level !== 'pod' && level !== 'node') {
    throw new DataError(file, rec.line, `level must be service, pod or node, not '${level ?? ''}'`);
  }
  const id = textField(file, rec, c.cmdb_id, 'cmdb_id');
  const startUs = timeUs(file, rec, c.timestamp);
  const node = level === 'node' ? id : level === 'pod' ? nodeOfPod.get(id) : undefined;
  return {
    id: `aiops-${isoUs(startUs).replace(/[-:]/g, '').slice(0, 15)}-${id}`,
    truth: {
      level,
      ...(level === 'service' ? { service: id } : level === 'pod' ? { pod: id, service: serviceOfOrdinalPod(id) } : {}),
      ...(node ? { node } : {}),
    },
    type: textField(file, rec, c.failure_type, 'failure_type'),
    start_us: startUs,
    end_us: startUs + faultWindowSec * 1e6,
    notes: [],
  };
}

export const aiops2022: Importer<typeof Aiops2022Settings> = {
  name: 'aiops2022',
  describe: 'AIOps Challenge 2022 / OpenRCA CSV layout (spans, metrics, ground truth)',
  settings: Aiops2022Settings,
  async import(src, s, progress) {
    sourceDir(src, 'the aiops2022 layout keeps spans, metrics and ground truth there, in CSV files told apart by their headers');
    const { files, parts } = layout(src);
    const isNode = nodeRegExp(s.node_pattern);
    const spans: Span[] = [];
    const points = new Map<string, MetricPoints>();
    const nodeOfPod = new Map<string, string>();
    const truthRows: { file: string; rec: CsvRecord; c: Record<Column<typeof TRUTH>, number> }[] = [];
    for (const { file, kind } of files) {
      progress(`reading ${file}`);
      let c: Record<string, number> | undefined;
      for await (const rec of readCsv(file)) {
        c ??= columns(file, rec.header, kind === 'span' ? SPAN : kind === 'metric' ? METRIC : TRUTH);
        if (kind === 'span') spans.push(spanOf(file, rec, c));
        else if (kind === 'metric') addMetricPoint(file, rec, c, isNode, points, nodeOfPod);
        else {
          truthRows.push({ file, rec, c: c as Record<Column<typeof TRUTH>, number> });
        }
      }
    }
    // After all files: a fault's node comes from the metrics' "node.pod" ids.
    const faults = truthRows.map(({ file, rec, c }) => faultOf(file, rec, c, nodeOfPod, s.fault_window_sec));
    for (const sp of spans) {
      const node = nodeOfPod.get(sp.pod);
      if (node) sp.node = node;
    }
    const pods = [...new Set(spans.map((x) => x.pod))].map((pod) => ({
      pod,
      service: serviceOfOrdinalPod(pod),
      ...(nodeOfPod.has(pod) ? { node: nodeOfPod.get(pod) } : {}),
    }));
    return {
      spans,
      baselineSpans: [],
      metrics: [...points.values()].map((p) => seriesData(p.component, p.level, p.name, p.points)),
      logs: { templates: [], records: [] },
      pods,
      faults,
      gaps: { parts },
    };
  },
};
