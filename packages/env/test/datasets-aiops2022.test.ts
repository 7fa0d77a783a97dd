/**
 * AIOps-2022 / OpenRCA importer on small files the test writes: units, statuses, cmdb_id kinds,
 * cases under both rules and their settings, stable ids, and file:line errors.
 */
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { FORMAT_VERSION, importDataset, loadDataset, type LoadedDataset } from '../src/datasets/index';

const T0_MS = 1_650_000_000_000;
const MIN = 60_000;

interface Req {
  id: string;
  atMs: number;
  callee: string;
  calleeMs: number;
  status?: string;
}

/** One request: frontend-0 entry span and one child on the callee pod. */
function spanRows(r: Req): string[] {
  const entryMs = r.calleeMs + 5;
  return [
    `${r.atMs},frontend-0,${r.id}-a,${r.id},${entryMs},rpc,0,hipstershop.Frontend/Recv,`,
    `${r.atMs + 1},${r.callee},${r.id}-b,${r.id},${r.calleeMs},rpc,${r.status ?? '0'},/${r.callee.replace(/-\d+$/, '')}/Get,${r.id}-a`,
  ];
}

function writeSource(dir: string, extra: { badDuration?: boolean; badLevel?: boolean } = {}) {
  mkdirSync(join(dir, 'trace'), { recursive: true });
  mkdirSync(join(dir, 'metric'), { recursive: true });
  const reqs: Req[] = [];
  for (let i = 0; i < 5; i++) reqs.push({ id: `base${i}`, atMs: T0_MS + i * MIN, callee: 'cartservice-0', calleeMs: 5.5 });
  for (let i = 0; i < 5; i++) reqs.push({ id: `cur${i}`, atMs: T0_MS + i * MIN + 500, callee: 'currencyservice-0', calleeMs: 5 });
  const f = T0_MS + 20 * MIN;
  reqs.push({ id: 'slow1', atMs: f + 10_000, callee: 'cartservice-0', calleeMs: 500 });
  reqs.push({ id: 'slow2', atMs: f + 20_000, callee: 'cartservice-0', calleeMs: 480 });
  reqs.push({ id: 'slow3', atMs: f + 30_000, callee: 'cartservice-0', calleeMs: 520 });
  reqs.push({ id: 'fail1', atMs: f + 40_000, callee: 'cartservice-0', calleeMs: 5, status: '500' });
  reqs.push({ id: 'fine1', atMs: f + 50_000, callee: 'cartservice-0', calleeMs: 6 });
  reqs.push({ id: 'elsewhere', atMs: f + 60_000, callee: 'currencyservice-0', calleeMs: 900 });
  const rows = reqs.flatMap(spanRows);
  if (extra.badDuration) rows[3] = rows[3].replace(',5.5,', ',abc,');
  writeFileSync(
    join(dir, 'trace', 'trace_span.csv'),
    ['timestamp,cmdb_id,span_id,trace_id,duration,type,status_code,operation_name,parent_span', ...rows].join('\n'),
  );
  const s = (ms: number) => Math.floor(ms / 1000);
  writeFileSync(
    join(dir, 'metric', 'metric_container.csv'),
    [
      'timestamp,cmdb_id,kpi_name,value',
      `${s(f + MIN)},node-1.cartservice-0,container_cpu_usage_seconds,0.9`,
      `${s(f)},node-1.cartservice-0,container_cpu_usage_seconds,0.2`,
      `${s(f)},node-1,system.cpu.pct_usage,35`,
      `${s(f)},frontend,rrt,12.5`,
    ].join('\n'),
  );
  writeFileSync(
    join(dir, 'groundtruth.csv'),
    [
      'timestamp,level,cmdb_id,failure_type',
      `${s(f)},${extra.badLevel ? 'cluster' : 'service'},cartservice,cpu`,
      `${s(f + 60 * MIN)},node,node-1,disk`,
    ].join('\n'),
  );
}

describe('aiops2022 importer', () => {
  let src: string;
  let ds: LoadedDataset;
  beforeAll(async () => {
    src = mkdtempSync(join(tmpdir(), 'aiops-src-'));
    writeSource(src);
    ds = await importDataset({ format: 'aiops2022', src, out: join(src, '..', `${src.split('/').pop()}-out`) });
  });

  it('converts ms timestamps and ms durations to µs and reads status codes', () => {
    const slow = ds.traces.span('slow1-b')!;
    expect(slow.start_us).toBe((T0_MS + 20 * MIN + 10_001) * 1000);
    expect(slow.duration_us).toBe(500_000);
    expect(ds.traces.span('base0-b')!.duration_us).toBe(5500);
    expect(ds.traces.span('fail1-b')).toMatchObject({ status: 'error', status_code: '500' });
    expect(ds.traces.span('fine1-b')!.status).toBe('ok');
    expect(ds.traces.entry('slow1')!.span_id).toBe('slow1-a');
    expect(ds.traces.children('slow1-a').map((x) => x.span_id)).toEqual(['slow1-b']);
  });

  it('tells pods, services and nodes apart by cmdb_id', () => {
    expect(ds.topology.serviceOfPod('cartservice-0')).toBe('cartservice');
    expect(ds.topology.pods.find((p) => p.pod === 'cartservice-0')?.node).toBe('node-1');
    expect(ds.traces.span('slow1-b')!.node).toBe('node-1');
    expect(ds.topology.nodes).toEqual(['node-1']);
    const cart = ds.metrics.series('cartservice');
    expect(cart.map((m) => [m.component, m.level, m.name])).toEqual([['cartservice-0', 'pod', 'container_cpu_usage_seconds']]);
    expect([...cart[0].values]).toEqual([0.2, 0.9]);
    expect(cart[0].ts[0]).toBe(Math.floor((T0_MS + 20 * MIN) / 1000));
    expect(ds.metrics.series('node-1')[0]).toMatchObject({ level: 'node', name: 'system.cpu.pct_usage' });
    expect(ds.metrics.series('frontend')[0]).toMatchObject({ level: 'service', name: 'rrt' });
  });

  it('derives cases with the baseline rule: slow and failed requests that reach the truth', () => {
    const [cart, node] = ds.faults;
    expect(cart.truth).toEqual({ level: 'service', service: 'cartservice' });
    expect(cart.case_count).toBe(4);
    expect(ds.cases.map((c) => c.trace_id)).toEqual(['slow1', 'slow2', 'slow3', 'fail1']);
    expect(ds.cases[0].anomaly.rule).toBe('baseline');
    expect(ds.cases[0].anomaly.reason).toContain('cartservice /cartservice/Get');
    expect(ds.cases[3].anomaly.reason).toContain('status 500');
    expect(cart.notes.at(-1)).toContain('5 of 6 requests in the window anomalous; 5 reach cartservice, 4 of them anomalous');
    expect(node.truth).toEqual({ level: 'node', node: 'node-1' });
    expect(node.case_count).toBe(0);
    expect(node.no_case_reason).toBe('no request starts inside the fault window');
  });

  it('keeps requests that miss the truth when asked, caps per fault, and keeps ids stable', async () => {
    const all = await importDataset({
      format: 'aiops2022',
      src,
      out: mkdtempSync(join(tmpdir(), 'aiops-out-')),
      settings: { cases: { require_truth_in_trace: false } },
    });
    expect(all.cases.map((c) => c.trace_id)).toEqual(['slow1', 'slow2', 'slow3', 'fail1', 'elsewhere']);
    const capped = await importDataset({
      format: 'aiops2022',
      src,
      out: mkdtempSync(join(tmpdir(), 'aiops-out-')),
      settings: { cases: { max_cases_per_fault: 2 } },
    });
    expect(capped.cases).toHaveLength(2);
    expect(capped.faults[0].case_count).toBe(2);
    const ids = new Set(ds.cases.map((c) => c.id));
    for (const c of [...all.cases, ...capped.cases]) if (c.trace_id !== 'elsewhere') expect(ids.has(c.id)).toBe(true);
  });

  it("under ThinkFL's rule only the failed request counts (50x is below 100x)", async () => {
    const t = await importDataset({
      format: 'aiops2022',
      src,
      out: mkdtempSync(join(tmpdir(), 'aiops-out-')),
      settings: { cases: { anomaly: { rule: 'thinkfl' } } },
    });
    expect(t.cases.map((c) => c.trace_id)).toEqual(['fail1']);
    const lower = await importDataset({
      format: 'aiops2022',
      src,
      out: mkdtempSync(join(tmpdir(), 'aiops-out-')),
      settings: { cases: { anomaly: { rule: 'thinkfl', thinkfl_factor: 40 } } },
    });
    expect(lower.cases.map((c) => c.trace_id)).toEqual(['slow1', 'slow2', 'slow3', 'fail1']);
  });

  it('loads back what it wrote', async () => {
    const again = await loadDataset(join(src, '..', `${src.split('/').pop()}-out`));
    expect(again.cases).toEqual(ds.cases);
    expect(again.faults).toEqual(ds.faults);
    expect(again.traces.size).toBe(ds.traces.size);
    expect(again.traces.span('fail1-b')).toEqual(ds.traces.span('fail1-b'));
    expect(again.meta).toMatchObject({ format: 'aiops2022', format_version: FORMAT_VERSION });
  });

  it('names file and line of a bad row', async () => {
    const bad = mkdtempSync(join(tmpdir(), 'aiops-bad-'));
    writeSource(bad, { badDuration: true });
    await expect(importDataset({ format: 'aiops2022', src: bad, out: join(bad, 'out') })).rejects.toThrow(
      `${join(bad, 'trace', 'trace_span.csv')}:5: duration is not a number: 'abc'`,
    );
    const badTruth = mkdtempSync(join(tmpdir(), 'aiops-bad-'));
    writeSource(badTruth, { badLevel: true });
    await expect(importDataset({ format: 'aiops2022', src: badTruth, out: join(badTruth, 'out') })).rejects.toThrow(
      `${join(badTruth, 'groundtruth.csv')}:2: level must be service, pod or node, not 'cluster'`,
    );
  });

  it('names the settings path of a bad knob', async () => {
    await expect(
      importDataset({ format: 'aiops2022', src, out: join(src, 'x'), settings: { importer: { fault_window_sec: -1 } } }),
    ).rejects.toThrow('importer.fault_window_sec');
  });
});
