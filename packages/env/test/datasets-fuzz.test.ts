/**
 * Property: whatever random truncation or byte flips hit one input file, an import ends in a
 * dataset or in a DataError naming that file and a line no later than the last damage (or the
 * next line holding anything after it, where a reader notices a lost separator);
 * nothing crashes. Inputs are real rows of the Nezha 2023-01-29 data: as they are for the
 * nezha importer, converted to the aiops2022 CSV tables and to OTLP/JSON (one export per line
 * and one pretty-printed document) for the other two. Seeded, so a failure replays.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { damagedCopy, extractNezhaRaw } from '../../../testkit/nezha';
import { DataError, importDataset } from '../src/datasets/index';

const R = 'rca_data/2023-01-29';
const RUNS = 40;
const PODS = ['ts-order-service-5b67c48447-mv5hb', 'ts-gateway-service-6f6cfc45b-h5m2n'];

/** mulberry32: small seeded PRNG. */
function prng(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Line of byte `at`, counting every kind of line break (as readline does). */
function lineOf(buf: Buffer, at: number): number {
  let n = 1;
  for (let i = 0; i < at && i < buf.length; i++) {
    if (buf[i] === 0x0a) n++;
    else if (buf[i] === 0x0d && buf[i + 1] !== 0x0a) n++;
  }
  return n;
}

const BYTES = [...'",\n:{}[]0a-'].map((c) => c.charCodeAt(0));

/** A random truncation (kept 1..n-1 bytes) or 1-3 byte flips; with the last line it touched. */
function damage(buf: Buffer, rnd: () => number): { out: Buffer; lastLine: number; what: string } {
  if (rnd() < 0.4) {
    const keep = 1 + Math.floor(rnd() * (buf.length - 1));
    return { out: buf.subarray(0, keep), lastLine: lineOf(buf, keep - 1), what: `truncated to ${keep} bytes` };
  }
  const out = Buffer.from(buf);
  const flips: string[] = [];
  let last = 0;
  for (let k = 1 + Math.floor(rnd() * 3); k > 0; k--) {
    const at = Math.floor(rnd() * out.length);
    out[at] = rnd() < 0.5 ? BYTES[Math.floor(rnd() * BYTES.length)] : Math.floor(rnd() * 256);
    flips.push(`${at}=0x${out[at].toString(16)}`);
    last = Math.max(last, at);
  }
  // A reader sees damage at the next token at the latest: a flipped-in line break or a lost comma shows on the next line that holds anything.
  let next = last + 1;
  while (next < out.length && ' \t\r\n'.includes(String.fromCharCode(out[next]))) next++;
  return { out, lastLine: Math.max(lineOf(buf, last), lineOf(out, next)), what: `bytes ${flips.join(' ')}` };
}

type Csv = { head: string[]; rows: string[][] };
function csv(file: string, lines: number): Csv {
  const [head, ...rows] = readFileSync(file, 'utf8').split('\n').slice(0, lines + 1);
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

let raw: string;
let work: string;
const sources: Record<string, { src: string; files: string[]; settings?: { importer: Record<string, unknown> } }> = {};

beforeAll(() => {
  raw = extractNezhaRaw([
    `${R}/2023-01-29-fault_list.json`,
    `${R}/trace/08_44_trace.csv`,
    `${R}/traceid/08_44_traceid.csv`,
    ...PODS.map((p) => `${R}/metric/${p}_metric.csv`),
    `${R}/metric/front_service.csv`,
    'construct_data/2023-01-29/trace/08_50_trace.csv',
    `${R}/log/08_44_log.csv`,
  ]);
  work = mkdtempSync(join(tmpdir(), 'fuzz-'));
  const head = (rel: string, n: number) => readFileSync(join(raw, rel), 'utf8').split('\n').slice(0, n + 1).join('\n');
  const logLines = readFileSync(join(raw, R, 'log', '08_44_log.csv'), 'utf8').split('\n');
  const faultList = readFileSync(join(raw, R, '2023-01-29-fault_list.json'), 'utf8');

  // nezha: the real files, cut to a few hundred rows each (log: its first rows and its error rows).
  const nezhaFiles = {
    [`${R}/2023-01-29-fault_list.json`]: faultList,
    [`${R}/trace/08_44_trace.csv`]: head(`${R}/trace/08_44_trace.csv`, 300),
    [`${R}/traceid/08_44_traceid.csv`]: head(`${R}/traceid/08_44_traceid.csv`, 60),
    ...Object.fromEntries(PODS.map((p) => [`${R}/metric/${p}_metric.csv`, head(`${R}/metric/${p}_metric.csv`, 60)])),
    [`${R}/metric/front_service.csv`]: head(`${R}/metric/front_service.csv`, 60),
    ['construct_data/2023-01-29/trace/08_50_trace.csv']: head('construct_data/2023-01-29/trace/08_50_trace.csv', 300),
    [`${R}/log/08_44_log.csv`]: [...logLines.slice(0, 100), ...logLines.slice(100).filter((l) => /ERROR|WARN/.test(l)).slice(0, 60)].join('\n'),
  };
  sources.nezha = {
    src: write(join(work, 'nezha'), nezhaFiles),
    files: Object.keys(nezhaFiles).filter((f) => !f.includes('/traceid/')),
  };

  // The same spans (and fault-free ones, for a baseline), metrics and faults as AIOps-2022 tables (ms times, ms durations).
  const faulty = csv(join(raw, R, 'trace', '08_44_trace.csv'), 300);
  const t = { head: faulty.head, rows: [...csv(join(raw, 'construct_data/2023-01-29/trace/08_50_trace.csv'), 300).rows, ...faulty.rows] };
  const spanRows = t.rows.map((r) => {
    const ms = (Number(BigInt(r[col(t, 'StartTimeUnixNano')]) / 1000n) / 1000).toFixed(3);
    const parent = r[col(t, 'ParentID')] === 'root' ? '' : r[col(t, 'ParentID')];
    return [ms, r[col(t, 'PodName')], r[col(t, 'SpanID')], r[col(t, 'TraceID')], Number(r[col(t, 'Duration')]) / 1000, 'rpc', '0', r[col(t, 'OperationName')], parent].join(',');
  });
  const m = csv(join(raw, R, 'metric', `${PODS[0]}_metric.csv`), 40);
  const metricRows = m.rows.flatMap((r) => ['CpuUsage(m)', 'MemoryUsage(Mi)', 'PodServerLatencyP90(s)'].map((k) => [r[col(m, 'TimeStamp')], PODS[0], k, r[col(m, k)]].join(',')));
  const faults = Object.values(JSON.parse(faultList) as Record<string, Record<string, string>[]>).flat();
  const truthRows = faults.map((f) => [Date.parse(`${f.inject_time.replace(' ', 'T')}Z`) / 1000, 'pod', f.inject_pod, f.inject_type].join(','));
  const aiopsFiles = {
    'trace/trace_span.csv': ['timestamp,cmdb_id,span_id,trace_id,duration,type,status_code,operation_name,parent_span', ...spanRows].join('\n'),
    'metric/metric_container.csv': ['timestamp,cmdb_id,kpi_name,value', ...metricRows.filter((r) => !r.endsWith(',NaN'))].join('\n'),
    'groundtruth.csv': ['timestamp,level,cmdb_id,failure_type', ...truthRows].join('\n'),
  };
  // Nezha faults last about 3 minutes; the fault-free minute (08:49-08:50) stays outside every window.
  sources.aiops2022 = { src: write(join(work, 'aiops2022'), aiopsFiles), files: Object.keys(aiopsFiles), settings: { importer: { faultWindowSec: 180 } } };

  // And as OTLP/JSON: one export per trace, per line of a .jsonl; the first trace also as a pretty .json.
  const byTrace = new Map<string, string[][]>();
  for (const r of t.rows) byTrace.set(r[col(t, 'TraceID')], [...(byTrace.get(r[col(t, 'TraceID')]) ?? []), r]);
  const exportOf = (rows: string[][]) => ({
    resourceSpans: [...new Set(rows.map((r) => r[col(t, 'PodName')]))].map((pod) => ({
      resource: { attributes: [{ key: 'service.name', value: { stringValue: pod.split('-').slice(0, -2).join('-') } }, { key: 'k8s.pod.name', value: { stringValue: pod } }] },
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
  const labels = faults.map((f) => ({ time: `${f.inject_time.replace(' ', 'T')}Z`, level: 'pod', component: f.inject_pod, type: f.inject_type }));
  const otlpFiles = {
    'traces.jsonl': traces.slice(1).map((r) => JSON.stringify(exportOf(r))).join('\n'),
    'first.json': JSON.stringify(exportOf(traces[0]), null, 2),
    'labels.json': JSON.stringify(labels, null, 2),
  };
  sources.otlp = { src: write(join(work, 'otlp'), otlpFiles), files: Object.keys(otlpFiles) };
  sources.nezha.settings = { importer: { logs: true } };
});
afterAll(() => {
  for (const d of [raw, work]) rmSync(d, { recursive: true, force: true });
});

describe.each(['nezha', 'aiops2022', 'otlp'])('%s readers under random damage to real rows', (format) => {
  it('import the undamaged rows into a dataset with cases', async () => {
    const { src, settings } = sources[format];
    const d = await importDataset({ format, src, out: join(work, `${format}-clean`), settings });
    expect(d.traces.size).toBeGreaterThan(100);
    expect(d.cases.length).toBeGreaterThan(0);
  });

  it(`end ${RUNS} damaged imports in a dataset or an error naming the damaged file and line`, async () => {
    const { src, files, settings } = sources[format];
    const rnd = prng(0x5eed + format.length);
    const outcomes = { dataset: 0, error: 0 };
    for (let run = 0; run < RUNS; run++) {
      const rel = files[Math.floor(rnd() * files.length)];
      const { out, lastLine, what } = damage(readFileSync(join(src, rel)), rnd);
      const copy = damagedCopy(src, { write: { [rel]: out } });
      const where = `run ${run}: ${rel} ${what}`;
      try {
        await importDataset({ format, src: copy, out: join(copy, 'out'), settings });
        outcomes.dataset++;
      } catch (e) {
        if (!(e instanceof DataError)) throw new Error(`${where}: not a file:line error: ${(e as Error).stack}`);
        expect(e.file, where).toBe(join(copy, rel));
        expect(e.line, `${where}: ${e.message}`).toBeGreaterThanOrEqual(1);
        expect(e.line, `${where}: ${e.message}`).toBeLessThanOrEqual(lastLine);
        expect(e.message.startsWith(`${e.file}:${e.line}: `), where).toBe(true);
        outcomes.error++;
      }
      rmSync(copy, { recursive: true, force: true });
    }
    expect(outcomes.dataset).toBeGreaterThan(0);
    expect(outcomes.error).toBeGreaterThan(0);
  });
});
