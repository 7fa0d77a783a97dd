/**
 * report.html in headless Chromium without a training run: a run directory holding the files a
 * run writes (an expert episode by the controller's own writer, a held-out evaluation of the
 * expert on real cases by the env's evaluator, two GRPO metrics lines), its report written by
 * `trainer-ctl report`'s code, and the page read back: the embedded data is snake_case
 * (issue 28) and the page script reads every field it shows from it.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createExpert, evaluate, ExpertSettingsSchema, loadDataset, runEpisode, solverFor, type EpisodeRecord } from '@thinkfl/env';
import { evalReport } from '../src/controller/evaluation';
import { gatherReport } from '../src/report/data';
import { reportHtml } from '../src/report/html';
import { appendEpisodes, appendMetrics } from '../src/run-files/metrics-log';
import { initialState, writeState } from '../src/run-files/state';
import { camelCaseKeys } from '../../../testkit/camel-keys';
import { ensureNezhaDataset, REPO_ROOT } from '../../../testkit/nezha';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const OUTPUT = join(REPO_ROOT, '.cache', 'test-output');

let runDir: string;
let episode: EpisodeRecord;
let browser: Browser;
/** The held-out cases' fault types with their case counts, from the dataset: "type (n)" sorted by type. */
let typesPlayed: string;

beforeAll(async () => {
  const dataset = await loadDataset(await ensureNezhaDataset());
  const kase = dataset.cases[0];
  episode = await runEpisode({ dataset, case: kase, policy: createExpert(dataset, ExpertSettingsSchema.parse({})) });
  runDir = mkdtempSync(join(tmpdir(), 'report-html-'));
  writeState(runDir, { ...initialState('report-html', '/models/tiny'), metrics_lines: 2 });
  writeFileSync(join(runDir, 'run.json'), JSON.stringify({ config_file: join(REPO_ROOT, 'configs', 'ci-smoke.yaml') }));
  appendEpisodes(runDir, { stage: 'exploration', step: 1 }, [{ reward: 0.5, episode }]);
  for (const step of [1, 2]) appendMetrics(runDir, { kind: 'grpo', stage: 'exploration', step, tool_calls: step + 1 });

  // A held-out evaluation as controller/evaluation.ts writes it, of the expert on three cases of other faults.
  const cases = dataset.cases.filter((c) => c.fault_id !== kase.fault_id).slice(0, 3);
  const episodes: EpisodeRecord[] = [];
  const expert = solverFor(dataset, 'expert');
  const result = await evaluate(dataset, cases, async (c) => {
    const r = await expert(c);
    if (r.episode) episodes.push(r.episode);
    return r;
  });
  const counts = new Map<string, number>();
  for (const c of cases) {
    const type = dataset.faults.find((f) => f.id === c.fault_id)!.type;
    counts.set(type, (counts.get(type) ?? 0) + 1);
  }
  typesPlayed = [...counts]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([type, n]) => `${type} 1.00 (${n})`)
    .join(', ');
  const report = evalReport('exploration', 7, cases.length, episodes, result);
  writeFileSync(join(runDir, 'eval-exploration.json'), `${JSON.stringify(report, null, 1)}\n`);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update'],
  });
}, 180_000);
afterAll(async () => {
  await browser?.close();
  rmSync(runDir, { recursive: true, force: true });
});

describe('report.html', () => {
  it('embeds its data in snake_case', async () => {
    const data = await gatherReport(runDir, { baselines: false });
    expect(data).toMatchObject({ run: 'report-html', run_dir: runDir, created_at: expect.any(String) });
    expect(data.evals[0]).toMatchObject({ name: 'exploration', policy_version: 7, cases: 3, format_valid: 1, answered: 1 });
    expect(data.episodes[0]).toMatchObject({ case_id: episode.case_id, tool_calls: episode.tool_calls.length, stop_reason: 'answered' });
    expect(camelCaseKeys(data, 'report')).toEqual([]);
  });

  it('shows in Chromium the run, the evaluation, the tool-call curve and the transcript from those fields', async () => {
    mkdirSync(OUTPUT, { recursive: true });
    const html = join(OUTPUT, 'report-html.html');
    writeFileSync(html, reportHtml(await gatherReport(runDir, { baselines: true })));
    const embedded = /<script id="report-data" type="application\/json">(.*?)<\/script>/s.exec(readFileSync(html, 'utf8'))![1];
    expect(camelCaseKeys(JSON.parse(embedded), 'report-data')).toEqual([]);

    const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
    const errors: string[] = [];
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`file://${html}`);
    await page.waitForFunction(() => (globalThis as unknown as { reportReady?: object }).reportReady);

    expect(await page.textContent('body > p')).toMatch(
      new RegExp(`^${runDir}: 0 updates, in progress; report written \\d{4}-\\d\\d-\\d\\dT`),
    );
    expect(await page.textContent('#evals h3')).toBe('after exploration: policy v7, 3 held-out cases, service level');
    expect(await page.textContent('#evals p')).toBe(`format validity 1.00, answered 1.00; by fault type: ${typesPlayed}`);
    expect(await page.$$eval('.u-title', (ts) => ts.map((t) => t.textContent))).toContain('Tool calls per episode');
    expect(await page.$$eval('#case option', (o) => o.map((x) => (x as unknown as { value: string }).value))).toEqual([episode.case_id]);
    const calls = episode.tool_calls.length;
    expect(await page.textContent('#episode-list li')).toMatch(new RegExp(`^exploration:1: reward 0\\.500, ${calls} calls, answer `));
    expect(await page.textContent('#episode p')).toBe(`exploration:1, reward 0.500, ${calls} tool calls, answered`);
    expect(errors).toEqual([]);
    await page.close();
  });
});
