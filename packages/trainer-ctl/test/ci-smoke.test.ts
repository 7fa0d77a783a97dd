/**
 * configs/ci-smoke.yaml as a user's CI runs it (`trainer-ctl train`, from the repository, the
 * tiny model made by the run when missing): SFT and the three GRPO stages complete, every
 * run.expect is met and junit.xml says so; the same run re-checked with an impossible
 * expectation exits non-zero naming it. The run's outputs are then read the ways a user reads
 * them: TensorBoard's own reader on its event files, `trainer-ctl status --watch` in a log,
 * and `trainer-ctl report` opened in headless Chromium (screenshot in .cache/test-output/).
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseJunit } from 'junit2json';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { policyNames } from '@thinkfl/env';
import { loadRunConfig } from '../src/config/index';
import { EPISODES_FILE, readJsonLines, readMetrics } from '../src/run-files/metrics-log';
import { readState } from '../src/run-files/state';
import { camelCaseKeys } from '../../../testkit/camel-keys';
import { REPO_ROOT } from '../../../testkit/nezha';
import { readTensorboardScalars } from '../../../testkit/tensorboard';
import { runCli, type CliResult } from './train-fixtures';

const PRESET = join(REPO_ROOT, 'configs', 'ci-smoke.yaml');
const OUTPUT = join(REPO_ROOT, '.cache', 'test-output');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const scratch = mkdtempSync(join(tmpdir(), 'ci-smoke-'));
const runDir = join(scratch, 'run');
let first: CliResult;

/** The part of a browser canvas the drawing check reads (the project's tsconfig has no DOM types). */
interface Canvas2d {
  width: number;
  height: number;
  getContext(kind: '2d'): { getImageData(x: number, y: number, w: number, h: number): { data: Uint8ClampedArray } };
}

interface JunitCase {
  name: string;
  failure?: { message: string }[];
}
async function readJunit(): Promise<{ tests: number; failures: number; cases: JunitCase[] }> {
  const r = (await parseJunit(readFileSync(join(runDir, 'junit.xml'), 'utf8'))) as {
    tests: number;
    failures: number;
    testsuite: { testcase: JunitCase[] }[];
  };
  return { tests: r.tests, failures: r.failures, cases: r.testsuite[0].testcase };
}

beforeAll(async () => {
  first = await runCli(['train', PRESET, '--run-dir', runDir]);
}, 1_800_000);
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('configs/ci-smoke.yaml', () => {
  const config = loadRunConfig(PRESET, { checkPaths: false }).config;
  const names = config.run.expect.map((e) => e.name!);

  it('runs SFT and the three stages, meets every expectation and writes junit.xml beside metrics.jsonl', async () => {
    expect(first.code, first.stderr.slice(-4000)).toBe(0);
    const state = readState(runDir)!;
    expect(state.done).toBe(true);
    const metrics = readMetrics(runDir);
    expect(metrics.filter((m) => m.kind === 'sft').length).toBeGreaterThan(0);
    for (const stage of ['priming', 'exploration', 'refinement'] as const) {
      const steps = config.stages[stage].steps;
      expect(metrics.filter((m) => m.kind === 'grpo' && m.stage === stage).map((m) => m.step)).toEqual([...Array(steps).keys()]);
      // Not a terminal: one plain progress line per step.
      for (let s = 1; s <= steps; s++) expect(first.stderr).toMatch(new RegExp(`^${stage} ${s}/${steps} \\d+%`, 'm'));
    }
    expect(names.length).toBeGreaterThanOrEqual(5);
    for (const n of names) expect(first.stdout).toContain(`expect ok   ${n}: `);
    expect(first.stdout).toContain(`run.expect: all ${names.length} expectations met; report ${join(runDir, 'junit.xml')}`);
    const junit = await readJunit();
    expect(junit.tests).toBe(names.length);
    expect(junit.failures).toBe(0);
    expect(junit.cases.map((c) => c.name)).toEqual(names);
  });

  it('exits non-zero naming the failed expectation when the run is checked again with one it cannot meet', async () => {
    const impossible = 'stage-1 reward reaches 3 (recall and format give at most 2)';
    const text = readFileSync(PRESET, 'utf8')
      .replace(/base_dir: \.\./, `base_dir: ${REPO_ROOT}`)
      .replace(/ {2}expect:\n/, `  expect:\n    - { name: ${impossible}, metric: priming/reward/mean, of: max, min: 3 }\n`);
    const file = join(scratch, 'ci-smoke-strict.yaml');
    writeFileSync(file, text);
    const r = await runCli(['train', file, '--run-dir', runDir]);
    expect(r.code).not.toBe(0);
    expect(r.stdout).toContain('is already complete');
    expect(r.stdout).toMatch(new RegExp(`expect FAIL ${impossible.replace(/[()]/g, '\\$&')}: max [\\d.]+ is below the minimum 3`));
    expect(r.stderr).toContain(`run.expect: 1 of ${names.length + 1} expectations failed: ${impossible} (max `);
    const junit = await readJunit();
    expect(junit.tests).toBe(names.length + 1);
    expect(junit.failures).toBe(1);
    const failed = junit.cases.filter((c) => c.failure);
    expect(failed.map((c) => c.name)).toEqual([impossible]);
    expect(failed[0].failure![0].message).toMatch(/^max [\d.]+ is below the minimum 3$/);
  });

  it('writes TensorBoard event files that TensorBoard reads back with the metrics and evaluations of the run', () => {
    const tb = readTensorboardScalars(join(runDir, 'tensorboard'));
    const at = (tag: string, step: number) => tb[tag]?.find(([s]) => s === step)?.[1];
    const metrics = readMetrics(runDir);
    metrics.forEach((m, i) => {
      const step = i + 1;
      const train = m.train as Record<string, number>;
      if (m.kind === 'sft') {
        expect(at('sft/train/loss', step)).toBeCloseTo(train.loss, 5);
        return;
      }
      const r = m as typeof m & { reward: { mean: number }; format_valid: number; tool_calls: number; timing: { rollout_ms: number } };
      expect(at(`${m.stage}/reward/mean`, step)).toBeCloseTo(r.reward.mean, 5);
      expect(at(`${m.stage}/format_valid`, step)).toBeCloseTo(r.format_valid, 5);
      expect(at(`${m.stage}/train/kl`, step)).toBeCloseTo(train.kl, 4);
      expect(at(`${m.stage}/timing/rollout_ms`, step)).toBeCloseTo(r.timing.rollout_ms, 0);
    });
    for (const name of ['sft', 'priming', 'exploration', 'refinement']) {
      const e = JSON.parse(readFileSync(join(runDir, `eval-${name}.json`), 'utf8'));
      expect(tb[`eval/${name}/format_valid`]?.map(([, v]) => v)).toEqual([e.format_valid]);
      expect(tb[`eval/${name}/per_fault_vote/service/mrr`]?.[0][1]).toBeCloseTo(e.summary.per_fault_vote.service.mrr, 6);
    }
  });

  it('status --watch in a log prints one plain line per step and evaluation, and returns when the run is done', async () => {
    const r = await runCli(['status', runDir, '--watch', '--interval', '0.2']);
    expect(r.code).toBe(0);
    const lines = r.stdout.trim().split('\n');
    const metrics = readMetrics(runDir);
    expect(lines).toHaveLength(metrics.length + 4 + 1);
    expect(lines.filter((l) => /^priming step \d+ \(update \d+\): reward /.test(l))).toHaveLength(config.stages.priming.steps);
    expect(lines.at(-1)).toBe(`run ci-smoke done: ${readState(runDir)!.updates} updates`);
    expect(r.stdout).not.toContain('\x1b');
  });

  it('writes every key of metrics.jsonl, episodes.jsonl, the evaluations, state.json, run.json and `status --json` in snake_case', async () => {
    const status = await runCli(['status', runDir, '--json']);
    expect(status.code, status.stderr).toBe(0);
    const files = readdirSync(runDir).filter((f) => /^(eval-.+|state|run)\.json$/.test(f));
    expect(files.filter((f) => f.startsWith('eval-'))).toHaveLength(4);
    const episodes = readJsonLines(join(runDir, EPISODES_FILE));
    // Every kind of line: evaluations' and steps' episodes, with the tools' observation data.
    expect(new Set(episodes.map((e) => ('eval' in (e as object) ? 'eval' : 'step')))).toEqual(new Set(['eval', 'step']));
    const found = [
      ...readMetrics(runDir).flatMap((m, i) => camelCaseKeys(m, `metrics.jsonl:${i + 1}`)),
      ...episodes.flatMap((e, i) => camelCaseKeys(e, `${EPISODES_FILE}:${i + 1}`)),
      ...files.flatMap((f) => camelCaseKeys(JSON.parse(readFileSync(join(runDir, f), 'utf8')), f)),
      ...camelCaseKeys(JSON.parse(status.stdout), 'status'),
    ];
    expect(found).toEqual([]);
  });

  describe('trainer-ctl report in headless Chromium', () => {
    let browser: Browser;
    beforeAll(async () => {
      browser = await chromium.launch({
        executablePath: CHROMIUM,
        args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update'],
      });
    });
    afterAll(async () => browser?.close());

    it('opens offline, draws every chart, shows the evaluations against the baselines and the transcripts, with no console error', async () => {
      mkdirSync(OUTPUT, { recursive: true });
      const html = join(OUTPUT, 'report.html');
      const r = await runCli(['report', runDir, '--out', html]);
      expect(r.code, r.stderr).toBe(0);
      expect(readFileSync(html, 'utf8')).not.toMatch(/<script[^>]+src=|<link[^>]+href=/); // self-contained

      const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
      const errors: string[] = [];
      const requests: string[] = [];
      page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
      page.on('pageerror', (e) => errors.push(String(e)));
      page.on('request', (q) => requests.push(q.url()));
      await page.goto(`file://${html}`);
      const ready = await page
        .waitForFunction(() => (globalThis as unknown as { reportReady?: object }).reportReady)
        .then((h) => h.jsonValue());
      expect(ready).toMatchObject({ evals: 4 });

      // Every chart's canvas has drawn lines: pixels of a series colour, not just the grey frame.
      const drawn = await page.$$eval('.chart canvas', (canvases) =>
        canvases.map((c) => {
          const canvas = c as unknown as Canvas2d;
          const d = canvas.getContext('2d')!.getImageData(0, 0, canvas.width, canvas.height).data;
          let coloured = 0;
          for (let i = 0; i < d.length; i += 4)
            if (d[i + 3] > 0 && Math.max(d[i], d[i + 1], d[i + 2]) - Math.min(d[i], d[i + 1], d[i + 2]) > 60) coloured++;
          return coloured;
        }),
      );
      expect(drawn.length).toBe((ready as { charts: number }).charts);
      expect(drawn.length).toBeGreaterThanOrEqual(8);
      for (const n of drawn) expect(n).toBeGreaterThan(50);
      const titles = await page.$$eval('.u-title', (ts) => ts.map((t) => t.textContent));
      expect(titles).toEqual(
        expect.arrayContaining([
          'Reward and graders (mean, std)',
          'KL, clip fraction, entropy',
          'Time per step (s)',
          'Held-out per-fault MRR by stage',
        ]),
      );

      const tables = await page.$$eval('table.eval', (ts) =>
        ts.map((t) => [...t.querySelectorAll('tbody tr')].map((tr) => tr.querySelector('td')!.textContent)),
      );
      expect(tables).toHaveLength(4);
      for (const rows of tables) {
        expect(rows[0]).toMatch(/^policy v\d+$/);
        expect(rows.slice(1)).toEqual(policyNames().map((n) => `${n} (scripted)`));
      }

      expect(await page.$$eval('#episode-list li', (li) => li.length)).toBeGreaterThan(0);
      expect(await page.textContent('#episode')).toMatch(/answer: .* truth: /s);
      expect(await page.$$eval('#episode .msg', (m) => m.length)).toBeGreaterThan(2);

      await page.screenshot({ path: join(OUTPUT, 'report.png'), fullPage: true });
      expect(errors).toEqual([]);
      expect(requests.every((u) => u.startsWith('file://'))).toBe(true);
      await page.close();
    });
  });
});
