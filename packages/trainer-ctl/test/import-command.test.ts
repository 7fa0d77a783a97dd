/**
 * trainer-ctl import on a damaged cut of the real Nezha data: gaps are warnings on stderr and
 * in meta.json, --strict fails without leaving a directory; and project commands print no npm
 * warning (no unknown key in the project's npm config).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { camelCaseKeys } from '../../../testkit/camel-keys';
import { damagedCopy, nezhaCut, REPO_ROOT } from '../../../testkit/nezha';

const run = promisify(execFile);
const BIN = join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs');
const R = 'rca_data/2023-01-29';
let cut: string;
let src: string;
let dir: string;

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], { cwd: dir, maxBuffer: 1 << 24 });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: x.code, stdout: x.stdout, stderr: x.stderr };
  }
}

beforeAll(() => {
  cut = nezhaCut(['08_58', '08_59', '09_00']);
  src = damagedCopy(cut, { remove: [`${R}/trace/09_00_trace.csv`] });
  dir = mkdtempSync(join(tmpdir(), 'import-cmd-'));
  writeFileSync(join(dir, 'settings.yaml'), 'importer:\n  logs: false\n');
});
afterAll(() => {
  for (const d of [cut, src, dir]) rmSync(d, { recursive: true, force: true });
});

describe('trainer-ctl import', () => {
  it('imports around a missing minute, warning on stderr and keeping the gap in meta.json', async () => {
    const r = await cli(['import', '--format', 'nezha', '--src', src, '--out', 'ds', '--settings', 'settings.yaml']);
    expect(r.code).toBe(0);
    const requests = readFileSync(join(cut, R, 'traceid', '09_00_traceid.csv'), 'utf8')
      .split('\n')
      .filter((l) => l.trim()).length;
    expect(r.stderr).toContain(
      `warning: traces missing for 2023-01-29 08:59-09:00 UTC: ${join(src, R, 'trace', '09_00_trace.csv')} (${requests} requests listed)\n`,
    );
    expect(r.stderr).toMatch(
      /warning: fault nezha-20230129-085816: 60 s of its window without traces \(44 s recorded\); \d+ cases kept, about \d+ lost\n/,
    );
    expect(r.stdout).toContain('written to ds');
    const meta = JSON.parse(readFileSync(join(dir, 'ds', 'meta.json'), 'utf8'));
    expect(meta.gaps.traces).toHaveLength(1);
    expect(meta.gaps.faults.map((f: { fault_id: string }) => f.fault_id)).toEqual(['nezha-20230129-085816']);
    expect(meta.settings.importer).toMatchObject({ fault_window_sec: 180, inject_tolerance_sec: 60, logs: false });
    expect(camelCaseKeys(meta, 'meta.json')).toEqual([]);
  });

  it('refuses a settings file with camelCase keys, naming the file, each key and its new spelling, and writes nothing', async () => {
    writeFileSync(
      join(dir, 'old-settings.yaml'),
      'importer:\n  faultWindowSec: 120\ncases:\n  maxCasesPerFault: 5\n  anomaly: { latencySigma: 2 }\n',
    );
    const r = await cli(['import', '--format', 'nezha', '--src', cut, '--out', 'old', '--settings', 'old-settings.yaml']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('trainer-ctl: old-settings.yaml: invalid settings:\n');
    expect(r.stderr).toContain('  importer.faultWindowSec: renamed: write fault_window_sec (keys are snake_case)\n');
    expect(r.stderr).toContain('  cases.maxCasesPerFault: renamed: write max_cases_per_fault (keys are snake_case)\n');
    expect(r.stderr).toContain('  cases.anomaly.latencySigma: renamed: write latency_sigma (keys are snake_case)\n');
    expect(existsSync(join(dir, 'old'))).toBe(false);
  });

  it('eval on that dataset repeats the gaps on stderr and in its results', async () => {
    const r = await cli(['eval', '--dataset', 'ds', '--policy', 'microrank', '--limit', '2', '--out', 'eval.json']);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/^warning: dataset ds: traces missing for 2023-01-29 08:59-09:00 UTC: /m);
    expect(r.stderr).toMatch(/^warning: dataset ds: fault nezha-20230129-085816: 60 s of its window without traces/m);
    const gaps = JSON.parse(readFileSync(join(dir, 'eval.json'), 'utf8')).dataset.gaps as string[];
    expect(gaps).toHaveLength(2);
    expect(gaps[0]).toMatch(/^traces missing for 2023-01-29 08:59-09:00 UTC/);
  });

  it('--strict fails on the same source, exit 2, and leaves no directory', async () => {
    const r = await cli(['import', '--format', 'nezha', '--src', src, '--out', 'strict', '--settings', 'settings.yaml', '--strict']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      'trainer-ctl: the source has gaps (an import without --strict goes around them):\n  traces missing for 2023-01-29 08:59-09:00 UTC',
    );
    expect(existsSync(join(dir, 'strict'))).toBe(false);
  });

  it('--strict imports the undamaged cut', async () => {
    const r = await cli(['import', '--format', 'nezha', '--src', cut, '--out', 'clean', '--settings', 'settings.yaml', '--strict']);
    expect(r.code).toBe(0);
    expect(r.stderr).not.toContain('warning');
    expect(JSON.parse(readFileSync(join(dir, 'clean', 'meta.json'), 'utf8')).gaps).toEqual({ traces: [], logs: [], parts: [], faults: [] });
  });
});

describe('npm', () => {
  it('prints no warning before `npx trainer-ctl --help`', async () => {
    // The project's npm settings, not the machine's: a user's or global npmrc (this machine's user one
    // sets `nodedir`, which some npm versions warn about; any unknown key warns) is not the project's to
    // answer for, so npm gets empty ones of the test's own. The user config turns off the notice of a
    // newer npm, which depends on the day and the registry, not on the project.
    const userconfig = join(dir, 'test-npmrc');
    writeFileSync(userconfig, 'update-notifier=false\n');
    const globalconfig = join(dir, 'empty-global-npmrc');
    writeFileSync(globalconfig, '');
    const env = {
      ...Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith('npm_'))),
      NPM_CONFIG_USERCONFIG: userconfig,
      NPM_CONFIG_GLOBALCONFIG: globalconfig,
    };
    const { stdout, stderr } = await run('npx', ['--no-install', 'trainer-ctl', '--help'], { cwd: REPO_ROOT, env });
    expect(stdout).toContain('trainer-ctl <command>');
    expect(stderr).toBe('');
  });
});
