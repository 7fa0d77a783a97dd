/**
 * The Nezha 2023-01-29 import (built by vitest's globalSetup from ../shared) against raw rows
 * of the published archives: per-fault cases, every quirk of the data, and store lookups.
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { camelCaseKeys } from '../../../testkit/camel-keys';
import { extractNezhaRaw, NEZHA_DATASET, nezhaTestSettings } from '../../../testkit/nezha';
import { deriveCases } from '../src/datasets/cases';
import { readNezhaLogs } from '../src/datasets/importers/nezha-logs';
import { importDataset, loadDataset, parseSettings, CaseSettings, type LoadedDataset } from '../src/datasets/index';
import { isoToUs } from '../src/datasets/time';

const R = 'rca_data/2023-01-29';
const ORDER_POD = 'ts-order-service-5b67c48447-mv5hb';
const BASIC_POD = 'ts-basic-service-5dc8d4f9fd-46997';
const ASSURANCE_POD = 'ts-assurance-service-69876c9868-ssxsf';
const GATEWAY_POD = 'ts-gateway-service-6f6cfc45b-h5m2n';

/** Per-fault case counts under the default settings (baseline rule, truth in trace, cap 50). */
const EXPECTED_CASES: Record<string, number> = {
  'nezha-20230129-084304': 19,
  'nezha-20230129-085206': 7,
  'nezha-20230129-085816': 16,
  'nezha-20230129-090353': 16,
  'nezha-20230129-091256': 15,
  'nezha-20230129-092139': 34,
  'nezha-20230129-092539': 22,
  'nezha-20230129-093009': 10,
  'nezha-20230129-093419': 3,
  'nezha-20230129-094226': 1,
  'nezha-20230129-094934': 0,
  'nezha-20230129-095804': 0,
  'nezha-20230129-100434': 9,
  'nezha-20230129-101248': 15,
  'nezha-20230129-102010': 16,
  'nezha-20230129-102620': 10,
  'nezha-20230129-104510': 6,
  'nezha-20230129-105016': 9,
  'nezha-20230129-105645': 29,
  'nezha-20230129-110405': 29,
  'nezha-20230129-111356': 23,
  'nezha-20230129-111959': 21,
  'nezha-20230129-112903': 33,
  'nezha-20230129-113606': 17,
  'nezha-20230129-133154': 9,
  'nezha-20230129-142331': 4,
  'nezha-20230129-144957': 6,
  'nezha-20230129-154200': 6,
};

type Row = Record<string, string>;
function rows(file: string): Row[] {
  const [head, ...lines] = readFileSync(file, 'utf8').trim().split('\n');
  const names = head.split(',');
  return lines.map((l) => Object.fromEntries(l.split(',').map((v, i) => [names[i], v])));
}

let ds: LoadedDataset;
let raw: string;
beforeAll(async () => {
  ds = await loadDataset(NEZHA_DATASET);
  raw = extractNezhaRaw([
    `${R}/2023-01-29-fault_list.json`,
    `${R}/trace/08_43_trace.csv`,
    `${R}/metric/${ORDER_POD}_metric.csv`,
    `${R}/metric/${BASIC_POD}_metric.csv`,
    `${R}/metric/${ASSURANCE_POD}_metric.csv`,
    `${R}/metric/${GATEWAY_POD}_metric.csv`,
    `${R}/metric/front_service.csv`,
    'construct_data/2023-01-29/trace/08_50_trace.csv',
    `${R}/log/08_43_log.csv`,
    `${R}/log/09_21_log.csv`,
    `${R}/log/10_06_log.csv`,
  ]);
});

/**
 * A part's keys that are names, with the maps keyed by data left out: span signatures
 * ("ts-gateway-service FilteringWebHandler.handle") in baseline.json, services and template ids in
 * logs.json's rates.
 */
function namedKeys(part: string, v: Record<string, unknown>): unknown {
  if (part === 'baseline.json') {
    const children = v.children as Record<string, [number, Record<string, unknown>]>;
    return {
      ...v,
      spans: Object.values(v.spans as object),
      endpoints: Object.values(v.endpoints as object),
      children: Object.values(children).map(([n, c]) => [n, Object.values(c)]),
    };
  }
  if (part === 'logs.json') return { ...v, rates: Object.values(v.rates as object).map((r) => Object.values(r)) };
  return v;
}

describe('on disk', () => {
  it('writes every part in snake_case (format 4)', () => {
    const parts = readdirSync(NEZHA_DATASET).filter((f) => f.endsWith('.json'));
    expect(parts.sort()).toEqual([
      'baseline.json',
      'cases.json',
      'faults.json',
      'logs.json',
      'meta.json',
      'metrics.json',
      'topology.json',
      'traces.json',
    ]);
    const read = (part: string) => JSON.parse(readFileSync(join(NEZHA_DATASET, part), 'utf8'));
    for (const part of parts) expect(camelCaseKeys(namedKeys(part, read(part)), part), part).toEqual([]);
    // The data-keyed maps do hold keys the check would flag, so leaving them out is not a no-op.
    expect(camelCaseKeys(read('baseline.json'), 'baseline.json').length).toBeGreaterThan(0);
    expect(Object.keys(read('cases.json')[0]).sort()).toEqual([
      'anomaly',
      'entry_duration_us',
      'entry_span_id',
      'fault_id',
      'id',
      'timestamp_us',
      'trace_id',
      'truth',
    ]);
    expect(Object.keys(read('faults.json')[0]).sort()).toEqual(['case_count', 'end_us', 'id', 'notes', 'start_us', 'truth', 'type']);
    expect(read('logs.json').records[0]).toHaveProperty('template_id');
    expect(read('traces.json')).toHaveProperty('span_ids');
    expect(read('baseline.json').min_count).toBe(3);
  });
});

describe('faults and cases', () => {
  it('has the 28 labelled faults, each with cases or a stated reason', () => {
    expect(ds.faults).toHaveLength(28);
    const types: Record<string, number> = {};
    for (const f of ds.faults) types[f.type] = (types[f.type] ?? 0) + 1;
    expect(types).toEqual({ exception: 13, return: 11, cpu_contention: 4 });
    expect(Object.fromEntries(ds.faults.map((f) => [f.id, f.case_count]))).toEqual(EXPECTED_CASES);
    for (const f of ds.faults) {
      expect(ds.cases.filter((c) => c.fault_id === f.id)).toHaveLength(f.case_count);
      if (f.case_count === 0)
        expect(f.no_case_reason).toMatch(/requests in the window reach ts-verification-code-service.* none of them is anomalous/);
      else expect(f.no_case_reason).toBeUndefined();
    }
  });

  it('makes every case an anomalous entry request in its window that reaches the faulty pod', () => {
    const faults = new Map(ds.faults.map((f) => [f.id, f]));
    expect(new Set(ds.cases.map((c) => c.id)).size).toBe(ds.cases.length);
    for (const c of ds.cases) {
      const f = faults.get(c.fault_id)!;
      expect(c.id).toBe(`${f.id}/${c.trace_id}`);
      const entry = ds.traces.entry(c.trace_id)!;
      expect(entry.span_id).toBe(c.entry_span_id);
      expect(entry.parent_id).toBeNull();
      expect(c.timestamp_us).toBe(entry.start_us);
      expect(c.timestamp_us >= f.start_us && c.timestamp_us <= f.end_us).toBe(true);
      expect(ds.traces.trace(c.trace_id).some((s) => s.pod === f.truth.pod)).toBe(true);
      expect(c.anomaly.rule).toBe('baseline');
      expect(c.truth).toEqual(f.truth);
    }
  });

  it('derives the same case ids again, and more cases when requests may miss the faulty pod', () => {
    const drafts = ds.faults.map(({ case_count: _c, no_case_reason: _r, ...d }) => d);
    const again = deriveCases(drafts, ds.traces, ds.baseline, nezhaTestSettings().cases);
    expect(again.cases.map((c) => c.id)).toEqual(ds.cases.map((c) => c.id));
    const loose = deriveCases(
      drafts,
      ds.traces,
      ds.baseline,
      parseSettings(CaseSettings, { require_truth_in_trace: false, max_cases_per_fault: 1000 }, 'cases'),
    );
    const kept = new Set(loose.cases.map((c) => c.id));
    for (const c of ds.cases) expect(kept.has(c.id)).toBe(true);
    for (let i = 0; i < ds.faults.length; i++) expect(loose.faults[i].case_count).toBeGreaterThanOrEqual(ds.faults[i].case_count);
    expect(loose.cases.length).toBeGreaterThan(ds.cases.length);
    expect(loose.faults.every((f) => f.case_count > 0)).toBe(true);
  });

  it("finds no request 100x slower than its endpoint under ThinkFL's rule (Nezha has no status codes)", () => {
    const drafts = ds.faults.map(({ case_count: _c, no_case_reason: _r, ...d }) => d);
    const thinkfl = (factor: number) =>
      deriveCases(
        drafts,
        ds.traces,
        ds.baseline,
        parseSettings(CaseSettings, { anomaly: { rule: 'thinkfl', thinkfl_factor: factor } }, 'cases'),
      );
    const strict = thinkfl(100);
    expect(strict.cases).toEqual([]);
    for (const f of strict.faults) expect(f.no_case_reason).toContain("rule 'thinkfl'");
    const loose = thinkfl(3);
    expect(loose.cases.length).toBeGreaterThan(0);
    for (const c of loose.cases) {
      const endpoint = c.anomaly.reason.split(' of ')[1];
      expect(c.entry_duration_us / ds.baseline.endpoint(endpoint)!.meanUs).toBeGreaterThan(3);
    }
  });
});

describe('extracted source tree', () => {
  it('imports an already-extracted tree without logs, giving the same cases for the faults it covers', async () => {
    const tree = extractNezhaRaw([
      `${R}/2023-01-29-fault_list.json`,
      ...['08_43', '08_44', '08_45'].map((m) => `${R}/trace/${m}_trace.csv`),
      `${R}/metric/${ORDER_POD}_metric.csv`,
      'construct_data/2023-01-29/trace/08_50_trace.csv',
    ]);
    const part = await importDataset({
      format: 'nezha',
      src: tree,
      out: mkdtempSync(join(tmpdir(), 'nezha-part-')),
      settings: { importer: { logs: false } },
    });
    expect(part.faults).toHaveLength(28);
    const first = ds.faults[0].id;
    expect(part.cases.map((c) => c.id)).toEqual(ds.cases.filter((c) => c.fault_id === first).map((c) => c.id));
    expect(
      part.faults.filter((f) => f.case_count === 0).every((f) => f.no_case_reason === 'no request starts inside the fault window'),
    ).toBe(true);
    expect(part.topology.pods.find((p) => p.pod === ORDER_POD)?.node).toBeUndefined();
    expect(part.logs.query('ts-order-service', 0, Number.MAX_SAFE_INTEGER)).toEqual([]);
  });
});

describe('quirks of the real data', () => {
  it('reads Duration as µs and start/end as ns (exactly, beyond 2^53)', () => {
    const spans = rows(join(raw, R, 'trace', '08_43_trace.csv'));
    expect(spans.length).toBeGreaterThan(4000);
    for (const r of spans) {
      const s = ds.traces.span(r.SpanID)!;
      const start = BigInt(r.StartTimeUnixNano);
      const end = BigInt(r.EndTimeUnixNano);
      expect(s.start_us).toBe(Number(start / 1000n));
      expect(s.duration_us).toBe(Number(r.Duration));
      const diffUs = (end - start) / 1000n - BigInt(r.Duration);
      expect(diffUs >= -1n && diffUs <= 1n).toBe(true);
    }
  });

  it('uses inject_time as UTC and notes where inject_timestamp disagrees', () => {
    const list = JSON.parse(readFileSync(join(raw, R, '2023-01-29-fault_list.json'), 'utf8')) as Record<string, Row[]>;
    const flat = Object.keys(list)
      .sort()
      .flatMap((h) => list[h]);
    expect(flat).toHaveLength(28);
    let disagree = 0;
    flat.forEach((r, i) => {
      const f = ds.faults[i];
      const at = Date.parse(`${r.inject_time.replace(' ', 'T')}Z`) / 1000;
      expect(f.start_us).toBe(at * 1e6);
      expect(f.end_us).toBe((at + 180) * 1e6);
      expect(f.truth.pod).toBe(r.inject_pod);
      const off = Math.abs(at - Number(r.inject_timestamp)) > 60;
      if (off) disagree++;
      expect(f.notes.some((n) => n.includes('disagrees with inject_time'))).toBe(off);
    });
    expect(disagree).toBe(24);
    expect(ds.faults.filter((f) => f.type === 'cpu_contention').every((f) => !f.notes.some((n) => n.includes('disagrees')))).toBe(true);
    const dup = ds.faults.find((f) => f.id === 'nezha-20230129-091256')!;
    expect(dup.notes).toContain('inject_timestamp 1674954273 duplicates that of fault nezha-20230129-090353');
  });

  it('agrees with the file names: HH_MM holds spans from about HH:MM-1 to HH:MM, far from inject_timestamp', () => {
    const starts = rows(join(raw, R, 'trace', '08_43_trace.csv')).map((r) => Number(BigInt(r.StartTimeUnixNano) / 1000000000n));
    const from = Date.UTC(2023, 0, 29, 8, 42) / 1000;
    expect(Math.min(...starts)).toBeGreaterThanOrEqual(from - 60);
    expect(Math.max(...starts)).toBeLessThan(from + 120);
    expect(Math.min(...starts) - 1674953044).toBeGreaterThan(7 * 3600);
  });

  it('names services by the pod less its last two dash segments', () => {
    expect(ds.topology.serviceOfPod('ts-contacts-service-866bd68c97-xcqfx')).toBe('ts-contacts-service');
    for (const p of ds.topology.pods) expect(p.service).toBe(p.pod.split('-').slice(0, -2).join('-'));
    for (const s of ds.topology.services) expect(s).toMatch(/^ts-[a-z0-9-]+$/);
    expect(ds.topology.services).toContain('ts-ui-dashboard');
    expect(ds.faults[0].truth).toMatchObject({ level: 'pod', service: 'ts-contacts-service', node: '33.33.33.79' });
  });

  it("maps pods to nodes from the logs' Node column", () => {
    const logRows = readFileSync(join(raw, R, 'log', '08_43_log.csv'), 'utf8')
      .trim()
      .split('\n')
      .slice(1);
    const pairs = new Map(logRows.map((l) => l.split(',', 4)).map((f) => [f[3], f[2]]));
    expect(pairs.size).toBeGreaterThan(10);
    for (const [pod, node] of pairs) {
      expect(ds.topology.pods.find((p) => p.pod === pod)?.node).toBe(node);
      expect(ds.topology.resolve(pod)?.node).toBe(node);
    }
    const order = ds.traces.trace(ds.cases[0].trace_id).find((s) => pairs.has(s.pod))!;
    expect(order.node).toBe(pairs.get(order.pod));
    expect(ds.topology.nodes).toContain('33.33.33.76');
  });

  it('places pods that never log on the node whose Node* values they share', () => {
    const gateway = ds.topology.pods.find((p) => p.pod === GATEWAY_POD)!;
    expect(gateway.node).toBe('33.33.33.79');
    const own = rows(join(raw, R, 'metric', `${GATEWAY_POD}_metric.csv`)).map((r) => Number(r['NodeMemoryUsageRate(%)']));
    const node = [...ds.metrics.series('33.33.33.79').find((m) => m.name === 'NodeMemoryUsageRate(%)')!.values];
    const equal = own.filter((v, i) => v === node[i]).length;
    expect(equal / own.length).toBeGreaterThan(0.95);
    expect(ds.metrics.series(GATEWAY_POD).some((m) => m.name.startsWith('Node'))).toBe(false);
    expect(ds.topology.pods.filter((p) => p.node).length).toBe(44);
  });

  it('puts pod metric columns on the pod, Node* columns on its node, Frontend on the service of the entry spans', () => {
    const order = rows(join(raw, R, 'metric', `${ORDER_POD}_metric.csv`));
    const cpu = ds.metrics.series(ORDER_POD).find((m) => m.name === 'CpuUsage(m)')!;
    expect(cpu.level).toBe('pod');
    expect([...cpu.ts]).toEqual(order.map((r) => Number(r.TimeStamp)));
    expect([...cpu.values]).toEqual(order.map((r) => Number(r['CpuUsage(m)'])));
    expect(ds.metrics.series('ts-order-service').some((m) => m.component === ORDER_POD && m.name === 'CpuUsage(m)')).toBe(true);
    expect(ds.metrics.series(ORDER_POD).some((m) => m.name.startsWith('Node'))).toBe(false);
    const basic = rows(join(raw, R, 'metric', `${BASIC_POD}_metric.csv`));
    const nodeCpu = ds.metrics.series('33.33.33.76').find((m) => m.name === 'NodeCpuUsageRate(%)')!;
    expect(nodeCpu.level).toBe('node');
    expect([...nodeCpu.values]).toEqual(basic.map((r) => Number(r['NodeCpuUsageRate(%)'])));
    const front = rows(join(raw, R, 'metric', 'front_service.csv'));
    const entries = rows(join(raw, R, 'trace', '08_43_trace.csv')).filter((r) => r.ParentID === 'root');
    expect(new Set(entries.map((r) => r.PodName.split('-').slice(0, -2).join('-')))).toEqual(new Set(['ts-gateway-service']));
    expect(ds.meta.frontend).toEqual({ service: 'ts-gateway-service', chosen_by: 'detected: the service of 4590 of the 4590 entry spans' });
    expect(ds.metrics.series('ts-ui-dashboard').some((m) => m.level === 'service')).toBe(false);
    const p90 = ds.metrics.series('ts-gateway-service').find((m) => m.name === 'LatencyP90(s)')!;
    expect(p90.level).toBe('service');
    expect([...p90.values]).toEqual(front.map((r) => Number(r['LatencyP90(s)'])));
  });

  it('skips NaN metric cells instead of storing them', () => {
    const a = rows(join(raw, R, 'metric', `${ASSURANCE_POD}_metric.csv`));
    const s = ds.metrics.series(ASSURANCE_POD).find((m) => m.name === 'PodServerLatencyP90(s)')!;
    expect(s.values.length).toBe(a.filter((r) => r['PodServerLatencyP90(s)'] !== 'NaN').length);
    expect(s.values.length).toBeLessThan(a.length);
    expect([...s.values].every(Number.isFinite)).toBe(true);
  });

  it('times log rows whose TimeUnixNano overflowed by their Timestamp, and skips the spliced row', async () => {
    const negative = readFileSync(join(raw, R, 'log', '09_21_log.csv'), 'utf8')
      .split('\n')
      .map((l) => l.split(',', 8))
      .filter((f) => f[1]?.startsWith('-') && /ERROR|WARN/.test(f[7] ?? ''));
    expect(negative.length).toBeGreaterThan(0);
    for (const f of negative) {
      const ts = isoToUs(f[0])!;
      expect(ds.logs.query(f[3], ts, ts).some((r) => r.span_id === f[6])).toBe(true);
    }
    const one = extractNezhaRaw([`${R}/log/10_06_log.csv`]);
    const parsed = await readNezhaLogs([join(one, R, 'log', '10_06_log.csv')]);
    expect(parsed.corrupt).toEqual([join(one, R, 'log', '10_06_log.csv:631')]);
  });
});

describe('stores against raw rows', () => {
  it('looks spans up by id, parent and trace as the CSV says', () => {
    for (const r of rows(join(raw, R, 'trace', '08_43_trace.csv'))) {
      const s = ds.traces.span(r.SpanID)!;
      expect(s).toMatchObject({ trace_id: r.TraceID, pod: r.PodName, operation: r.OperationName, status: 'unset' });
      expect(s.parent_id).toBe(r.ParentID === 'root' ? null : r.ParentID);
      expect(ds.traces.trace(r.TraceID)).toContain(s);
      if (r.ParentID === 'root') expect(ds.traces.entry(r.TraceID)).toBe(s);
      else if (ds.traces.span(r.ParentID)) expect(ds.traces.children(r.ParentID)).toContain(s);
    }
    const kids = ds.traces.children(ds.cases[0].entry_span_id);
    expect(kids.length).toBeGreaterThan(0);
    for (let i = 1; i < kids.length; i++) expect(kids[i].start_us).toBeGreaterThanOrEqual(kids[i - 1].start_us);
    expect(ds.traces.children('no-such-span')).toEqual([]);
    expect(ds.traces.trace('no-such-trace')).toEqual([]);
  });

  it('keeps info, warn and error log lines with masked templates, by service and pod', () => {
    const lines = readFileSync(join(raw, R, 'log', '08_43_log.csv'), 'utf8')
      .trim()
      .split('\n')
      .slice(1);
    const errors = lines.map((l) => l.split(',', 8)).filter((f) => /^"\{""log"":""[\d:.]+ (ERROR|WARN)/.test(f[7]));
    expect(errors.length).toBeGreaterThan(0);
    for (const f of errors) {
      const ts = Number(BigInt(f[1]) / 1000n);
      const hit = ds.logs.query(f[3], ts, ts).find((r) => r.span_id === f[6])!;
      expect(hit).toMatchObject({ pod: f[3], node: f[2], trace_id: f[5] });
      const t = ds.logs.template(hit.template_id)!;
      expect(t.template).not.toContain(f[5]);
      expect(t.template).toMatch(/<HEX>|<TIME>/);
    }
    const svc = errors[0][3].split('-').slice(0, -2).join('-');
    const all = ds.logs.query(svc, 0, Number.MAX_SAFE_INTEGER);
    expect(all.some((r) => r.level === 'info')).toBe(true);
    expect(ds.logs.query(svc, 0, Number.MAX_SAFE_INTEGER, ['warn']).every((r) => r.level === 'warn')).toBe(true);
  });

  it("measures a template's usual rate in the windows of other services' faults", () => {
    const rec = ds.logs.query('ts-food-service', 0, Number.MAX_SAFE_INTEGER, ['error'])[0];
    const healthy = ds.faults.filter((f) => f.truth.service !== 'ts-food-service');
    let n = 0;
    for (const f of healthy)
      n += ds.logs.query('ts-food-service', f.start_us, f.end_us).filter((r) => r.template_id === rec.template_id).length;
    const minutes = healthy.reduce((m, f) => m + (f.end_us - f.start_us) / 60e6, 0);
    expect(n).toBeGreaterThan(0);
    expect(ds.logs.baselineRate('ts-food-service', rec.template_id)).toBeCloseTo(n / minutes, 9);
    expect(ds.logs.baselineRate('no-such-service', rec.template_id)).toBeUndefined();
  });

  it('gives fault-free durations and child patterns from construct_data', () => {
    const base = rows(join(raw, 'construct_data/2023-01-29/trace/08_50_trace.csv'));
    const roots = base.filter((r) => r.ParentID === 'root').map((r) => Number(r.Duration));
    const mean = roots.reduce((a, b) => a + b, 0) / roots.length;
    const entry = ds.traces.entry(ds.cases[0].trace_id)!;
    const usual = ds.baseline.duration(entry)!;
    expect(usual.count).toBe(roots.length);
    expect(usual.meanUs).toBeCloseTo(mean, 6);
    const pattern = ds.baseline.childPattern(entry)!;
    expect(pattern.get('ts-gateway-service FilteringWebHandler.handle')).toBeCloseTo(1, 6);
    expect(pattern.get('ts-gateway-service HTTP POST')! + (pattern.get('ts-gateway-service HTTP GET') ?? 0)).toBeGreaterThan(0.9);
  });
});
