/**
 * Real rows of the Nezha 2023-01-29 data as small sources of each importer: the Nezha files cut
 * to a few hundred rows, and the same spans (with fault-free ones, for a baseline), metrics and
 * faults converted to the aiops2022 CSV tables and to OTLP/JSON (one export per line of a
 * .jsonl, and one pretty-printed .json).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { extractNezhaRaw } from './nezha';

const R = 'rca_data/2023-01-29';
const PODS = ['ts-order-service-5b67c48447-mv5hb', 'ts-gateway-service-6f6cfc45b-h5m2n'];

export interface RealRowSource {
  src: string;
  /** Files a reader parses, relative to src. */
  files: string[];
  settings?: { importer: Record<string, unknown> };
}

type Csv = { head: string[]; rows: string[][] };
function csv(file: string, lines: number): Csv {
  const [head, ...rows] = readFileSync(file, 'utf8')
    .split('\n')
    .slice(0, lines + 1);
  return { head: head.split(','), rows: rows.map((r) => r.split(',')) };
}
const col = (t: Csv, name: string) => t.head.indexOf(name);

function write(root: string, files: Record<string, string>): string {
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, rel)), { recursive: true });
    writeFileSync(join(root, rel), text);
  }
  return root;
}

/** Writes the three sources under `work` (the raw extraction goes to a temp dir that is returned too). */
export function realRowSources(work: string): { raw: string; sources: Record<'nezha' | 'aiops2022' | 'otlp', RealRowSource> } {
  const sources = {} as Record<'nezha' | 'aiops2022' | 'otlp', RealRowSource>;
  const raw = extractNezhaRaw([
    `${R}/2023-01-29-fault_list.json`,
    `${R}/trace/08_44_trace.csv`,
    `${R}/traceid/08_44_traceid.csv`,
    ...PODS.map((p) => `${R}/metric/${p}_metric.csv`),
    `${R}/metric/front_service.csv`,
    'construct_data/2023-01-29/trace/08_50_trace.csv',
    `${R}/log/08_44_log.csv`,
  ]);
  const head = (rel: string, n: number) =>
    readFileSync(join(raw, rel), 'utf8')
      .split('\n')
      .slice(0, n + 1)
      .join('\n');
  const logLines = readFileSync(join(raw, R, 'log', '08_44_log.csv'), 'utf8').split('\n');
  const faultList = readFileSync(join(raw, R, '2023-01-29-fault_list.json'), 'utf8');

  // nezha: the real files, cut to a few hundred rows each (log: its first rows and its error rows).
  const nezhaFiles = {
    [`${R}/2023-01-29-fault_list.json`]: faultList,
    [`${R}/trace/08_44_trace.csv`]: head(`${R}/trace/08_44_trace.csv`, 300),
    [`${R}/traceid/08_44_traceid.csv`]: head(`${R}/traceid/08_44_traceid.csv`, 60),
    ...Object.fromEntries(PODS.map((p) => [`${R}/metric/${p}_metric.csv`, head(`${R}/metric/${p}_metric.csv`, 60)])),
    [`${R}/metric/front_service.csv`]: head(`${R}/metric/front_service.csv`, 60),
    'construct_data/2023-01-29/trace/08_50_trace.csv': head('construct_data/2023-01-29/trace/08_50_trace.csv', 300),
    [`${R}/log/08_44_log.csv`]: [
      ...logLines.slice(0, 100),
      ...logLines
        .slice(100)
        .filter((l) => /ERROR|WARN/.test(l))
        .slice(0, 60),
    ].join('\n'),
  };
  sources.nezha = {
    src: write(join(work, 'nezha'), nezhaFiles),
    files: Object.keys(nezhaFiles).filter((f) => !f.includes('/traceid/')),
    settings: { importer: { logs: true } },
  };

  // The same spans (and fault-free ones, for a baseline), metrics and faults as AIOps-2022 tables (ms times, ms durations).
  const faulty = csv(join(raw, R, 'trace', '08_44_trace.csv'), 300);
  const t = { head: faulty.head, rows: [...csv(join(raw, 'construct_data/2023-01-29/trace/08_50_trace.csv'), 300).rows, ...faulty.rows] };
  const spanRows = t.rows.map((r) => {
    const ms = (Number(BigInt(r[col(t, 'StartTimeUnixNano')]) / 1000n) / 1000).toFixed(3);
    const parent = r[col(t, 'ParentID')] === 'root' ? '' : r[col(t, 'ParentID')];
    return [
      ms,
      r[col(t, 'PodName')],
      r[col(t, 'SpanID')],
      r[col(t, 'TraceID')],
      Number(r[col(t, 'Duration')]) / 1000,
      'rpc',
      '0',
      r[col(t, 'OperationName')],
      parent,
    ].join(',');
  });
  const m = csv(join(raw, R, 'metric', `${PODS[0]}_metric.csv`), 40);
  const metricRows = m.rows.flatMap((r) =>
    ['CpuUsage(m)', 'MemoryUsage(Mi)', 'PodServerLatencyP90(s)'].map((k) => [r[col(m, 'TimeStamp')], PODS[0], k, r[col(m, k)]].join(',')),
  );
  const faults = Object.values(JSON.parse(faultList) as Record<string, Record<string, string>[]>).flat();
  const truthRows = faults.map((f) =>
    [Date.parse(`${f.inject_time.replace(' ', 'T')}Z`) / 1000, 'pod', f.inject_pod, f.inject_type].join(','),
  );
  const aiopsFiles = {
    'trace/trace_span.csv': ['timestamp,cmdb_id,span_id,trace_id,duration,type,status_code,operation_name,parent_span', ...spanRows].join(
      '\n',
    ),
    'metric/metric_container.csv': ['timestamp,cmdb_id,kpi_name,value', ...metricRows.filter((r) => !r.endsWith(',NaN'))].join('\n'),
    'groundtruth.csv': ['timestamp,level,cmdb_id,failure_type', ...truthRows].join('\n'),
  };
  // Nezha faults last about 3 minutes; the fault-free minute (08:49-08:50) stays outside every window.
  sources.aiops2022 = {
    src: write(join(work, 'aiops2022'), aiopsFiles),
    files: Object.keys(aiopsFiles),
    settings: { importer: { fault_window_sec: 180 } },
  };

  // And as OTLP/JSON: one export per trace, per line of a .jsonl; the first trace also as a pretty .json.
  const byTrace = new Map<string, string[][]>();
  for (const r of t.rows) byTrace.set(r[col(t, 'TraceID')], [...(byTrace.get(r[col(t, 'TraceID')]) ?? []), r]);
  const exportOf = (rows: string[][]) => ({
    resourceSpans: [...new Set(rows.map((r) => r[col(t, 'PodName')]))].map((pod) => ({
      resource: {
        attributes: [
          { key: 'service.name', value: { stringValue: pod.split('-').slice(0, -2).join('-') } },
          { key: 'k8s.pod.name', value: { stringValue: pod } },
        ],
      },
      scopeSpans: [
        {
          spans: rows
            .filter((r) => r[col(t, 'PodName')] === pod)
            .map((r) => ({
              traceId: r[col(t, 'TraceID')],
              spanId: r[col(t, 'SpanID')],
              parentSpanId: r[col(t, 'ParentID')] === 'root' ? '' : r[col(t, 'ParentID')],
              name: r[col(t, 'OperationName')],
              startTimeUnixNano: r[col(t, 'StartTimeUnixNano')],
              endTimeUnixNano: r[col(t, 'EndTimeUnixNano')],
              status: { code: 0 },
            })),
        },
      ],
    })),
  });
  const traces = [...byTrace.values()];
  const labels = faults.map((f) => ({
    time: `${f.inject_time.replace(' ', 'T')}Z`,
    level: 'pod',
    component: f.inject_pod,
    type: f.inject_type,
  }));
  const otlpFiles = {
    'traces.jsonl': traces
      .slice(1)
      .map((r) => JSON.stringify(exportOf(r)))
      .join('\n'),
    'first.json': JSON.stringify(exportOf(traces[0]), null, 2),
    'labels.json': JSON.stringify(labels, null, 2),
  };
  sources.otlp = { src: write(join(work, 'otlp'), otlpFiles), files: Object.keys(otlpFiles) };
  return { raw, sources };
}
