/** The small parts of the datasets module: CSV, time units, log masking, topology, settings, registries. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  CaseSettings,
  anomalyRule,
  FORMAT_VERSION,
  importer,
  loadDataset,
  maskLog,
  parseSettings,
  StaticTopology,
} from '../src/datasets/index';
import { readCsv, splitCsv } from '../src/datasets/csv';
import { levelInText } from '../src/datasets/log-template';
import { epochToUs, isoToUs, nsStringToUs, utcSeconds } from '../src/datasets/time';

describe('csv', () => {
  it('splits quoted fields with doubled quotes and commas', () => {
    expect(splitCsv('a,"b,""c""",d')).toEqual(['a', 'b,"c"', 'd']);
    expect(splitCsv('a,"open')).toBeNull();
  });

  it('reads records spanning lines and reports where each starts', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'csv-'));
    const f = join(dir, 'x.csv');
    writeFileSync(f, 'h1,h2\n1,"two\nlines"\n3,4\n');
    const rows = [];
    for await (const r of readCsv(f)) rows.push([r.line, r.fields]);
    expect(rows).toEqual([
      [2, ['1', 'two\nlines']],
      [4, ['3', '4']],
    ]);
  });

  it('names file and line of an unterminated quote', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'csv-'));
    const f = join(dir, 'bad.csv');
    writeFileSync(f, 'h\nok\n"never closed\n');
    const run = async () => {
      for await (const _ of readCsv(f)) void _;
    };
    await expect(run()).rejects.toThrow(`${f}:3: unterminated quoted field`);
  });
});

describe('time units', () => {
  it('cuts ns to µs as a string, exactly, beyond 2^53', () => {
    const ns = '1674981768697763387';
    expect(Number(ns) > Number.MAX_SAFE_INTEGER).toBe(true);
    expect(nsStringToUs(ns)).toBe(1674981768697763);
    expect(nsStringToUs('-6795364578871345152')).toBeUndefined();
  });

  it('detects s, ms, µs and ns epochs', () => {
    expect(epochToUs('1674981768')).toBe(1674981768_000000);
    expect(epochToUs('1674981768697')).toBe(1674981768697_000);
    expect(epochToUs('1674981768697763')).toBe(1674981768697763);
    expect(epochToUs('1674981768697763387')).toBe(1674981768697763);
    expect(epochToUs('1674981768.5')).toBe(1674981768_500000);
    expect(epochToUs('x')).toBeUndefined();
  });

  it('reads inject_time and ISO times as UTC', () => {
    expect(utcSeconds('2023-01-29 08:43:04')).toBe(1674981784);
    expect(isoToUs('2023-01-29T09:20:29.295')).toBe(Date.UTC(2023, 0, 29, 9, 20, 29, 295) * 1000);
    expect(isoToUs('2023-01-29T08:42:22.383150913Z')).toBe(Date.UTC(2023, 0, 29, 8, 42, 22, 383) * 1000 + 150);
  });
});

describe('log templates', () => {
  it('masks ids, times and numbers so one statement gives one template', () => {
    const a = maskLog(
      '16:42:22.418 ERROR f.s.FoodServiceImpl#302 TraceID: ffc8ca7e4c8f06c75142c880d5595d96 [date: 2021-07-14, tripId: D1345]',
    );
    const b = maskLog(
      '17:01:09.001 ERROR f.s.FoodServiceImpl#302 TraceID: 0a1b2c3d4e5f60718293a4b5c6d7e8f9 [date: 2021-08-01, tripId: D1346]',
    );
    expect(a).toBe(b);
    expect(a).toContain('<HEX>');
    expect(a).toContain('<TIME>');
    expect(maskLog('order 4d2a46c7-71cb-4cf1-b5bb-b68406d9da6f failed')).toBe('order <UUID> failed');
  });

  it('finds the level written in the text', () => {
    expect(levelInText('16:42:22.418 ERROR x')).toBe('error');
    expect(levelInText('16:42:14.471 WARN  v.s')).toBe('warn');
    expect(levelInText('16:42:14.471 INFO  v.s')).toBe('info');
    expect(levelInText('\tat com.example.Foo(Foo.java:1)')).toBeUndefined();
  });
});

describe('topology', () => {
  const topo = new StaticTopology({
    services: ['ts-contacts-service', 'ts-contacts-admin-service'],
    pods: [
      { pod: 'ts-contacts-service-866bd68c97-xcqfx', service: 'ts-contacts-service', node: '33.33.33.79' },
      { pod: 'ts-contacts-admin-service-1-2', service: 'ts-contacts-admin-service' },
    ],
    nodes: ['33.33.33.79'],
  });

  it('resolves exact, shortened and decorated names', () => {
    expect(topo.resolve('ts-contacts-service')).toEqual({ level: 'service', service: 'ts-contacts-service' });
    expect(topo.resolve('TS-CONTACTS-SERVICE-866bd68c97-xcqfx')?.level).toBe('pod');
    expect(topo.resolve('ts-contacts-service-866bd68c97')).toMatchObject({ level: 'pod', node: '33.33.33.79' });
    expect(topo.resolve('contacts')).toEqual({ level: 'service', service: 'ts-contacts-service' });
    expect(topo.resolve('33.33.33.79')).toEqual({ level: 'node', node: '33.33.33.79' });
    expect(topo.resolve('nothing-like-it')).toBeUndefined();
    expect(topo.serviceOfPod('ts-contacts-admin-service-1-2')).toBe('ts-contacts-admin-service');
  });
});

describe('settings and registries', () => {
  it('fills defaults and names the path of a bad knob', () => {
    const s = parseSettings(CaseSettings, {}, 'cases');
    expect(s).toMatchObject({ require_truth_in_trace: true, max_cases_per_fault: 50, anomaly: { rule: 'baseline', thinkfl_factor: 100 } });
    expect(() => parseSettings(CaseSettings, { anomaly: { thinkfl_factor: 'x' } }, 'cases')).toThrow('cases.anomaly.thinkfl_factor');
    expect(() => parseSettings(CaseSettings, { maxCases: 3 }, 'cases')).toThrow(
      'cases.maxCases: unknown key; expected one of: anomaly, require_truth_in_trace, max_cases_per_fault',
    );
  });

  it('rejects unknown rules and formats by name', () => {
    expect(anomalyRule('thinkfl').name).toBe('thinkfl');
    expect(() => anomalyRule('nope')).toThrow("unknown rule 'nope'");
    expect(importer('nezha').name).toBe('nezha');
    expect(() => importer('csv')).toThrow("unknown dataset format 'csv'");
  });
});

describe('a dataset imported before the snake_case rename', () => {
  // meta.json as the format-2 importer wrote it for .cache/datasets/nezha-2023-01-29 (camelCase keys).
  const FORMAT_2 = {
    name: 'nezha-2023-01-29',
    format: 'nezha',
    formatVersion: 2,
    source: '/work/shared/datasets/nezha-trainticket',
    createdAt: '2026-11-27T12:21:40.529Z',
    settings: {
      importer: { date: '2023-01-29', faultWindowSec: 180, injectToleranceSec: 60, logs: true },
      cases: { maxCasesPerFault: 50 },
    },
    gaps: { traces: [], logs: [], parts: [], faults: [] },
    frontend: { service: 'ts-gateway-service', chosenBy: 'detected: the service of 4590 of the 4590 entry spans' },
  };
  // The format-3 importer: meta.json in snake_case, the other parts (cases.json here) still camelCase.
  const FORMAT_3 = {
    name: 'nezha-2023-01-29',
    format: 'nezha',
    format_version: 3,
    source: '/work/shared/datasets/nezha-trainticket',
    created_at: '2026-11-27T15:04:12.635Z',
    settings: { importer: { date: '2023-01-29', fault_window_sec: 180, inject_tolerance_sec: 60, logs: true } },
    gaps: { traces: [], logs: [], parts: [], faults: [] },
    frontend: { service: 'ts-gateway-service', chosen_by: 'detected: the service of 4590 of the 4590 entry spans' },
  };
  const FORMAT_3_CASE = {
    id: 'nezha-20230129-084304/5d0bbaa5c74d96842aabc39c7b39d067',
    faultId: 'nezha-20230129-084304',
    traceId: '5d0bbaa5c74d96842aabc39c7b39d067',
    entrySpanId: '8313054b15fce5f8',
    timestampUs: 1674981788304000,
    entryDurationUs: 271292,
  };

  it.each([
    [2, FORMAT_2],
    [3, FORMAT_3],
  ])('of format %i is refused with its format and the command that imports it again from its source', async (version, meta) => {
    const dir = mkdtempSync(join(tmpdir(), 'old-dataset-'));
    writeFileSync(join(dir, 'meta.json'), JSON.stringify(meta));
    writeFileSync(join(dir, 'cases.json'), JSON.stringify([FORMAT_3_CASE]));
    await expect(loadDataset(dir)).rejects.toThrow(
      `${dir}: dataset format ${version}, this code reads ${FORMAT_VERSION}; import it again from its source ` +
        `(trainer-ctl import --format nezha --src /work/shared/datasets/nezha-trainticket --out ${dir}, ` +
        'or trainer-ctl train with dataset.import in the run config)',
    );
  });
});
