/**
 * Damaged copies of the real Nezha 2023-01-29 data (a cut of its first four faults, 08:43 to
 * 09:05, every file a symlink except the damage): a missing required part is an error naming
 * it and what the format keeps there; gaps are imported around, kept in meta.json and priced
 * per fault; --strict fails on them; a failed import leaves no output directory. The aiops2022
 * and otlp layouts are checked on the same real rows converted to their formats.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { damagedCopy, NEZHA_DATASET, nezhaCut } from '../../../testkit/nezha';
import { realRowSources } from '../../../testkit/real-rows';
import {
  DataError,
  gapLines,
  GapsError,
  importDataset,
  LayoutError,
  loadDataset,
  SettingsError,
  type LoadedDataset,
} from '../src/datasets/index';

const R = 'rca_data/2023-01-29';
const C = 'construct_data/2023-01-29';
const MINUTES = ['08_43', '08_44', '08_45', '08_52', '08_53', '08_54', '08_58', '08_59', '09_00', '09_03', '09_04', '09_05'];
const FIRST_FOUR = ['nezha-20230129-084304', 'nezha-20230129-085206', 'nezha-20230129-085816', 'nezha-20230129-090353'];

let cut: string;
let work: string;
let full: LoadedDataset;
let pristine: LoadedDataset;

const out = (name: string) => join(work, name);
const nezha = (src: string, name: string, extra: { strict?: boolean; importer?: Record<string, unknown> } = {}) =>
  importDataset({ format: 'nezha', src, out: out(name), strict: extra.strict, settings: { importer: { logs: false, ...extra.importer } } });
const casesOf = (d: LoadedDataset) =>
  Object.fromEntries(d.faults.filter((f) => FIRST_FOUR.includes(f.id)).map((f) => [f.id, f.case_count]));
/** Nothing of a failed import is left: neither the directory nor a temp sibling. */
const leftBehind = (name: string) => readdirSync(work).filter((n) => n.startsWith(name));
const lines = (file: string) =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim()).length;

beforeAll(async () => {
  cut = nezhaCut(MINUTES);
  work = mkdtempSync(join(tmpdir(), 'nezha-gaps-'));
  full = await loadDataset(NEZHA_DATASET);
  pristine = await nezha(cut, 'pristine');
});
afterAll(() => {
  for (const d of [cut, work]) rmSync(d, { recursive: true, force: true });
});

describe('an undamaged cut', () => {
  it('has no gaps and the cases of the whole day for its four faults', () => {
    expect(pristine.meta.gaps).toEqual({ traces: [], logs: [], parts: [], faults: [] });
    expect(gapLines(pristine.meta.gaps)).toEqual([]);
    expect(casesOf(pristine)).toEqual(casesOf(full));
  });
});

describe('required parts missing', () => {
  it.each([
    [`${R}/metric`, /rca_data\/2023-01-29\/metric is missing: the Nezha layout keeps the metrics there: one CSV per pod, <pod>_metric.csv/],
    [
      `${R}/trace`,
      /rca_data\/2023-01-29\/trace is missing: the Nezha layout keeps the traces of the fault day there, one CSV per minute: HH_MM_trace.csv/,
    ],
    [`${R}/2023-01-29-fault_list.json`, /2023-01-29-fault_list.json is missing: the Nezha layout keeps the day's injected faults there/],
  ])('%s: an error that names it and what the format keeps there, and no output', async (part, message) => {
    const src = damagedCopy(cut, { remove: [part] });
    const name = `missing-${part.split('/').pop()}`;
    const err = await nezha(src, name).catch((e: Error) => e);
    expect(err).toBeInstanceOf(LayoutError);
    expect((err as Error).message).toMatch(message);
    expect((err as Error).message).toContain(join(src, part));
    expect((err as Error).message).not.toContain('ENOENT');
    expect(leftBehind(name)).toEqual([]);
  });

  it('a truncated trace file: the file and line of the cut row, and no output', async () => {
    const text = readFileSync(join(cut, R, 'trace', '08_44_trace.csv'), 'utf8');
    const rows = text.split('\n');
    // Cut inside row 101 (line 102), after its SpanID: the file ends there.
    const kept = `${rows.slice(0, 101).join('\n')}\n${rows[101].split(',').slice(0, 2).join(',')}`;
    const src = damagedCopy(cut, { write: { [`${R}/trace/08_44_trace.csv`]: kept } });
    const err = await nezha(src, 'truncated').catch((e: Error) => e);
    expect(err).toBeInstanceOf(DataError);
    expect((err as DataError).file).toBe(join(src, R, 'trace', '08_44_trace.csv'));
    expect((err as DataError).line).toBe(102);
    expect(leftBehind('truncated')).toEqual([]);
  });
});

describe('gaps imported around', () => {
  it('fault-free trace file removed: the baseline falls back to requests outside the fault windows, and says so', async () => {
    const src = damagedCopy(cut, { remove: [`${C}/trace/08_50_trace.csv`] });
    const d = await nezha(src, 'no-baseline-file');
    const g = d.meta.gaps!;
    expect(g.baseline!.missing).toBe(
      `${join(src, C, 'trace')} holds no trace file (the Nezha layout keeps the fault-free traces of the day there, HH_MM_trace.csv)`,
    );
    // Hand count: spans of the traces whose entry starts outside all 28 fault windows (inject_time + 180 s).
    const windows = full.faults.map((f) => [f.start_us, f.end_us]);
    let outside = 0;
    for (const t of pristine.traces.traceIds()) {
      const at = pristine.traces.entry(t)?.start_us;
      if (at !== undefined && !windows.some(([a, b]) => at >= a && at <= b)) outside += pristine.traces.trace(t).length;
    }
    expect(outside).toBeGreaterThan(1000);
    expect(g.baseline!.fallback).toBe(`the ${outside} spans of requests that start outside every fault window`);
    expect(gapLines(g)[0]).toBe(`fault-free traces missing: ${g.baseline!.missing}; baseline taken from ${g.baseline!.fallback}`);
    expect(d.faults.filter((f) => FIRST_FOUR.includes(f.id)).map((f) => f.case_count)).not.toEqual(Object.values(casesOf(pristine)));
    expect(JSON.parse(readFileSync(join(out('no-baseline-file'), 'meta.json'), 'utf8')).gaps).toEqual(g);
  });

  it('fault-free trace folder removed: the same fallback, and no raw ENOENT', async () => {
    const src = damagedCopy(cut, { remove: [`${C}/trace`] });
    const d = await nezha(src, 'no-baseline-dir');
    expect(d.meta.gaps!.baseline!.missing).toBe(
      `${join(src, C, 'trace')} is missing (the Nezha layout keeps the fault-free traces of the day there, HH_MM_trace.csv)`,
    );
  });

  it('a minute file inside a fault window removed: the missing minutes as a range, and the cost to the fault', async () => {
    const src = damagedCopy(cut, { remove: [`${R}/trace/09_00_trace.csv`] });
    const d = await nezha(src, 'no-09-00');
    const g = d.meta.gaps!;
    const requests = lines(join(cut, R, 'traceid', '09_00_traceid.csv'));
    // File HH_MM holds about HH:MM-1 to HH:MM: 09_00 is 08:59 to 09:00.
    expect(g.traces).toEqual([
      {
        from_us: Date.UTC(2023, 0, 29, 8, 59) * 1000,
        to_us: Date.UTC(2023, 0, 29, 9, 0) * 1000,
        what: join(src, R, 'trace', '09_00_trace.csv'),
        requests,
      },
    ]);
    // Fault 08:58:16 + 180 s: 08:58:16-08:59 recorded (file 08_59), 08:59-09:00 missing; 09:00-09:01:16 never recorded.
    const f = d.faults.find((x) => x.id === 'nezha-20230129-085816')!;
    const anomalous = Number(/(\d+) of them anomalous/.exec(f.notes.at(-1)!)![1]);
    const expected = Math.min(50, Math.round((anomalous * (44 + 60)) / 44));
    expect(g.faults).toEqual([
      { fault_id: f.id, missing_sec: 60, recorded_sec: 44, cases: f.case_count, cases_lost: expected - f.case_count },
    ]);
    expect(f.case_count).toBeLessThan(casesOf(pristine)[f.id]);
    expect(g.faults[0].cases_lost).toBeGreaterThan(0);
    expect(gapLines(g)).toEqual([
      `traces missing for 2023-01-29 08:59-09:00 UTC: ${join(src, R, 'trace', '09_00_trace.csv')} (${requests} requests listed)`,
      `fault ${f.id}: 60 s of its window without traces (44 s recorded); ${f.case_count} cases kept, about ${expected - f.case_count} lost`,
    ]);
    const others = d.faults.filter((x) => FIRST_FOUR.includes(x.id) && x.id !== f.id);
    for (const x of others) expect(x.case_count).toBe(casesOf(pristine)[x.id]);
  });

  it('consecutive minutes removed: one range; a minute before the injection costs no fault anything', async () => {
    const src = damagedCopy(cut, { remove: [`${R}/trace/08_52_trace.csv`, `${R}/trace/08_53_trace.csv`, `${R}/trace/09_03_trace.csv`] });
    const g = (await nezha(src, 'three-minutes')).meta.gaps!;
    const listed = (m: string) => lines(join(cut, R, 'traceid', `${m}_traceid.csv`));
    expect(
      g.traces.map((t) => [
        new Date(t.from_us / 1000).toISOString().slice(11, 16),
        new Date(t.to_us / 1000).toISOString().slice(11, 16),
        t.requests,
      ]),
    ).toEqual([
      ['08:51', '08:53', listed('08_52') + listed('08_53')],
      ['09:02', '09:03', listed('09_03')],
    ]);
    // 08:52:06 + 180 s loses 08:52:06-08:53 (54 s); 09:03's gap ends before 09:03:53.
    expect(g.faults.map((f) => [f.fault_id, f.missing_sec])).toEqual([['nezha-20230129-085206', 54]]);
  });

  it('a missing log minute is found from the trace minutes, and a missing trace minute from the log minutes', async () => {
    const withLogs = nezhaCut(['08_58', '08_59', '09_00'], true);
    const src = damagedCopy(withLogs, { remove: [`${R}/log/08_59_log.csv`] });
    const g = (await nezha(src, 'no-log-minute', { importer: { logs: true } })).meta.gaps!;
    expect(g.traces).toEqual([]);
    expect(g.logs).toEqual([
      {
        from_us: Date.UTC(2023, 0, 29, 8, 58) * 1000,
        to_us: Date.UTC(2023, 0, 29, 8, 59) * 1000,
        what: join(src, R, 'log', '08_59_log.csv'),
      },
    ]);
    // A trace minute gone with its traceid file is still found, from the log minutes, without a request count.
    const both = damagedCopy(withLogs, { remove: [`${R}/trace/09_00_trace.csv`, `${R}/traceid/09_00_traceid.csv`] });
    const t = (await nezha(both, 'no-trace-nor-traceid', { importer: { logs: true } })).meta.gaps!;
    expect(t.traces).toEqual([
      {
        from_us: Date.UTC(2023, 0, 29, 8, 59) * 1000,
        to_us: Date.UTC(2023, 0, 29, 9, 0) * 1000,
        what: join(both, R, 'trace', '09_00_trace.csv'),
      },
    ]);
    expect(t.faults.map((f) => f.fault_id)).toEqual(['nezha-20230129-085816']);
    rmSync(withLogs, { recursive: true, force: true });
  });

  it('logs asked for but absent or empty (as in the published data archive): a gap that says how to leave them out', async () => {
    const g = (await nezha(cut, 'no-logs', { importer: { logs: true } })).meta.gaps!;
    expect(g.parts).toEqual([
      `logs missing: ${join(cut, R, 'log')} not found; the dataset has no logs (set importer.logs: false to leave them out on purpose)`,
    ]);
    const empty = damagedCopy(cut, {});
    mkdirSync(join(empty, R, 'log'));
    const e = (await nezha(empty, 'empty-logs', { importer: { logs: true } })).meta.gaps!;
    expect(e.parts).toEqual([
      `logs missing: ${join(empty, R, 'log')} holds no log file; the dataset has no logs (set importer.logs: false to leave them out on purpose)`,
    ]);
    expect(e.logs).toEqual([]);
  });
});

describe('--strict', () => {
  it.each([
    ['fault-free traces', [`${C}/trace/08_50_trace.csv`], /fault-free traces missing/],
    ['a minute', [`${R}/trace/09_00_trace.csv`], /traces missing for 2023-01-29 08:59-09:00 UTC[\s\S]*fault nezha-20230129-085816: 60 s/],
    ['front_service.csv', [`${R}/metric/front_service.csv`], /front_service.csv is missing: the dataset has no front-end-wide/],
  ])('fails on missing %s and leaves the dataset already there as it was', async (_what, remove, message) => {
    const name = `strict-${remove[0].split('/').pop()}`;
    await nezha(cut, name);
    const before = readFileSync(join(out(name), 'meta.json'), 'utf8');
    const err = await nezha(damagedCopy(cut, { remove }), name, { strict: true }).catch((e: Error) => e);
    expect(err).toBeInstanceOf(GapsError);
    expect((err as Error).message).toMatch(message);
    expect(readFileSync(join(out(name), 'meta.json'), 'utf8')).toBe(before);
    expect(leftBehind(name)).toEqual([name]);
  });

  it('fails into no directory at all when there was none', async () => {
    const err = await nezha(damagedCopy(cut, { remove: [`${R}/trace/08_44_trace.csv`] }), 'strict-fresh', { strict: true }).catch(
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(GapsError);
    expect(leftBehind('strict-fresh')).toEqual([]);
  });

  it('passes an undamaged cut', async () => {
    const d = await nezha(cut, 'strict-clean', { strict: true });
    expect(d.cases.length).toBe(pristine.cases.length);
  });
});

describe('front-end service', () => {
  it('is the service of the entry spans unless set, and the choice is kept', async () => {
    const entries = readFileSync(join(cut, R, 'trace', '08_43_trace.csv'), 'utf8')
      .split('\n')
      .filter((l) => l.split(',')[2] === 'root');
    expect(entries.length).toBeGreaterThan(0);
    expect(pristine.meta.frontend!.service).toBe('ts-gateway-service');
    expect(pristine.meta.frontend!.chosen_by).toMatch(/^detected: the service of (\d+) of the \1 entry spans$/);
    expect(
      pristine.metrics
        .series('ts-gateway-service')
        .filter((m) => m.level === 'service')
        .map((m) => m.name),
    ).toContain('SuccessRate(%)');
    const set = await nezha(cut, 'frontend-set', { importer: { frontend_service: 'ts-ui-dashboard' } });
    expect(set.meta.frontend).toEqual({ service: 'ts-ui-dashboard', chosen_by: 'setting importer.frontend_service' });
    expect(
      set.metrics
        .series('ts-ui-dashboard')
        .filter((m) => m.level === 'service')
        .map((m) => m.name),
    ).toContain('SuccessRate(%)');
    expect(set.metrics.series('ts-gateway-service').some((m) => m.level === 'service')).toBe(false);
  });

  it('must be set when no service holds most entry spans', async () => {
    // Two thirds of the entry rows moved to two other pods: no majority left.
    const file = `${R}/trace/08_43_trace.csv`;
    const pods = ['ts-ui-dashboard-5477b965f-2chkr', 'ts-order-service-5b67c48447-mv5hb'];
    let n = 0;
    const moved = readFileSync(join(cut, file), 'utf8')
      .split('\n')
      .map((l) => {
        const f = l.split(',');
        if (f[2] !== 'root' || n++ % 3 === 0) return l;
        f[3] = pods[n % 2];
        return f.join(',');
      })
      .join('\n');
    const only = MINUTES.filter((m) => m !== '08_43').flatMap((m) => [`${R}/trace/${m}_trace.csv`, `${R}/traceid/${m}_traceid.csv`]);
    const src = damagedCopy(cut, { remove: only, write: { [file]: moved } });
    const err = await nezha(src, 'frontend-ambiguous').catch((e: Error) => e);
    expect(err).toBeInstanceOf(SettingsError);
    expect((err as Error).message).toMatch(
      /^importer.frontend_service: .*no service holds most entry spans \((ts-[a-z-]+ \(1[78]\)(, )?){3}\); set it$/,
    );
    expect(leftBehind('frontend-ambiguous')).toEqual([]);
    const ok = await nezha(src, 'frontend-ambiguous', { importer: { frontend_service: 'ts-gateway-service' } });
    expect(ok.meta.frontend!.chosen_by).toBe('setting importer.frontend_service');
  });
});

describe('aiops2022 and otlp layouts, on real rows in their formats', () => {
  let rows: ReturnType<typeof realRowSources>;
  let starts: { faulty: number[]; clean: number[] };
  beforeAll(() => {
    rows = realRowSources(mkdtempSync(join(tmpdir(), 'real-rows-')));
    const us = (file: string) =>
      readFileSync(join(rows.raw, file), 'utf8')
        .split('\n')
        .slice(1, 301)
        .map((l) => Number(BigInt(l.split(',')[5]) / 1000n));
    starts = { faulty: us(`${R}/trace/08_44_trace.csv`), clean: us(`${C}/trace/08_50_trace.csv`) };
  });
  afterAll(() => rmSync(rows.raw, { recursive: true, force: true }));

  const run = (format: 'aiops2022' | 'otlp', src: string, name: string) =>
    importDataset({ format, src, out: out(name), settings: rows.sources[format].settings });

  it.each([
    [
      'groundtruth.csv',
      /holds no CSV of ground truth \(timestamp,level,cmdb_id,failure_type\): the aiops2022 layout keeps spans, metrics and ground truth in CSV files/,
    ],
    ['trace', /holds no CSV of spans \(timestamp,cmdb_id,span_id,trace_id,duration,status_code,operation_name,parent_span\)/],
  ])('aiops2022 without %s: a layout error', async (part, message) => {
    const err = await run('aiops2022', damagedCopy(rows.sources.aiops2022.src, { remove: [part] }), `aiops-no-${part}`).catch(
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(LayoutError);
    expect((err as Error).message).toMatch(message);
    expect(leftBehind(`aiops-no-${part}`)).toEqual([]);
  });

  it('aiops2022: no metrics and a CSV of unknown header are gaps; a silence is a trace gap priced per fault', async () => {
    const src = damagedCopy(rows.sources.aiops2022.src, { remove: ['metric'], write: { 'notes.csv': 'when,what\n1,x\n' } });
    const d = await run('aiops2022', src, 'aiops-gaps');
    const g = d.meta.gaps!;
    expect(g.parts).toEqual([
      'notes.csv ignored: its header matches no table of the aiops2022 layout',
      `no CSV of metrics (timestamp,cmdb_id,kpi_name,value) under ${src}: the dataset has no metrics`,
    ]);
    // The fault day's rows end at 08:43:2x and the fault-free rows start at 08:49: more than 300 s without a span.
    const last = Math.max(...starts.faulty);
    const first = Math.min(...starts.clean);
    expect(first - last).toBeGreaterThan(300e6);
    expect(g.traces).toEqual([{ from_us: last, to_us: first, what: `no span starts for ${((first - last) / 60e6).toFixed(1)} min` }]);
    const start = Date.UTC(2023, 0, 29, 8, 43, 4) * 1000;
    const f = d.faults.find((x) => x.start_us === start)!;
    expect(g.faults).toEqual([
      {
        fault_id: f.id,
        missing_sec: Math.round((start + 180e6 - last) / 1e6),
        recorded_sec: Math.round((last - Math.min(...starts.faulty)) / 1e6),
        cases: f.case_count,
        cases_lost: expect.any(Number),
      },
    ]);
    const strict = await importDataset({
      format: 'aiops2022',
      src,
      out: out('aiops-strict'),
      strict: true,
      settings: { ...rows.sources.aiops2022.settings, gaps: { max_silence_sec: 600 } },
    }).catch((e: Error) => e);
    expect(strict).toBeInstanceOf(GapsError);
    expect((strict as Error).message).not.toContain('traces missing');
    expect(leftBehind('aiops-strict')).toEqual([]);
  });

  it('otlp without its labels or without exports: layout errors', async () => {
    const noLabels = await run('otlp', damagedCopy(rows.sources.otlp.src, { remove: ['labels.json'] }), 'otlp-no-labels').catch(
      (e: Error) => e,
    );
    expect(noLabels).toBeInstanceOf(LayoutError);
    expect((noLabels as Error).message).toMatch(
      /labels.json is missing: the otlp layout keeps the faults there: a JSON list of \{time, level, component, type, duration_sec\?\}/,
    );
    const noTraces = await run(
      'otlp',
      damagedCopy(rows.sources.otlp.src, { remove: ['traces.jsonl', 'first.json'] }),
      'otlp-no-traces',
    ).catch((e: Error) => e);
    expect(noTraces).toBeInstanceOf(LayoutError);
    expect((noTraces as Error).message).toMatch(/holds no .json or .jsonl file: the otlp layout keeps OTLP\/JSON trace exports there/);
  });
});
