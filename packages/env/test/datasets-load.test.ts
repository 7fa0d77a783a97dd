/**
 * loadDataset on the real Nezha day: logs.json and metrics.json are opened at load and parsed
 * when a store is first asked. The stores' answers are checked against a brute-force scan of the
 * files themselves; the errors against the file and line at fault.
 */
import { readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { damagedCopy, ensureNezhaDataset } from '../../../testkit/nezha';
import { loadDataset } from '../src/datasets/index';
import type { LogData } from '../src/datasets/stores/log-store';
import type { MetricSeriesData } from '../src/datasets/stores/metric-store';

let dir: string;
beforeAll(async () => {
  dir = await ensureNezhaDataset();
});

const record = (ts_us: number, template_id: number) => ({ ts_us, service: 'ts-a', pod: 'ts-a-1', level: 'info', template_id });
const logs = (records: ReturnType<typeof record>[]) =>
  JSON.stringify({ templates: [{ id: 0, template: 't', example: 'e' }], records, rates: {} });

describe('loadDataset', () => {
  it('answers log and metric queries as a scan of the files does', async () => {
    const ds = await loadDataset(dir);
    const rawLogs = JSON.parse(readFileSync(join(dir, 'logs.json'), 'utf8')) as LogData;
    const rawMetrics = JSON.parse(readFileSync(join(dir, 'metrics.json'), 'utf8')) as MetricSeriesData[];
    const fault = ds.faults[0];
    const from = fault.start_us - 120e6;
    const to = fault.start_us + 120e6;
    const components = [fault.truth.service, ...ds.topology.pods.slice(0, 3).map((p) => p.pod)].filter((c): c is string => !!c);
    expect(components.length).toBeGreaterThan(2);
    for (const c of components) {
      const want = rawLogs.records
        .filter((r) => (r.service === c || r.pod === c) && r.ts_us >= from && r.ts_us <= to)
        .sort((a, b) => a.ts_us - b.ts_us)
        .map((r) => `${r.ts_us} ${r.template_id}`);
      const got = ds.logs.query(c, from, to).map((r) => `${r.ts_us} ${r.template_id}`);
      expect(got.sort()).toEqual(want.sort());
    }
    expect(components.some((c) => ds.logs.query(c, from, to).length > 0)).toBe(true);
    const pod = ds.topology.pods[0].pod;
    const series = ds.metrics.series(pod).filter((s) => s.component === pod);
    const wantSeries = rawMetrics.filter((s) => s.component === pod);
    expect(series.map((s) => s.name).sort()).toEqual(wantSeries.map((s) => s.name).sort());
    for (const s of wantSeries) expect([...series.find((x) => x.name === s.name)!.values]).toEqual(s.values);
  });

  it('reads no log file until asked: a malformed logs.json loads, and each query names its file and line', async () => {
    const copy = damagedCopy(dir, { write: { 'logs.json': '{\n  "templates": [\n    {"id": 0,,\n' } });
    const ds = await loadDataset(copy);
    expect(ds.traces.size).toBeGreaterThan(0);
    expect(ds.metrics.components().length).toBeGreaterThan(0);
    const query = () => ds.logs.query('ts-order-service', 0, Number.MAX_SAFE_INTEGER);
    expect(query).toThrow(`${join(copy, 'logs.json')}:3: not JSON`);
    expect(query).toThrow(`${join(copy, 'logs.json')}:3: not JSON`);
  });

  it('fails at load, naming the file, when metrics.json is missing', async () => {
    const copy = damagedCopy(dir, { remove: ['metrics.json'] });
    await expect(loadDataset(copy)).rejects.toThrow(join(copy, 'metrics.json'));
  });

  it('reads the import it loaded when the directory is imported again before the first query', async () => {
    const copy = damagedCopy(dir, { write: { 'logs.json': logs([record(5, 0)]) } });
    const ds = await loadDataset(copy);
    // As writeDatasetFiles replaces a dataset: a new directory renamed over the removed one.
    const next = damagedCopy(dir, { write: { 'logs.json': logs([record(5, 0), record(6, 0)]) } });
    rmSync(copy, { recursive: true });
    renameSync(next, copy);
    expect(ds.logs.query('ts-a', 0, 10)).toHaveLength(1);
    expect((await loadDataset(copy)).logs.query('ts-a', 0, 10)).toHaveLength(2);
  });
});
