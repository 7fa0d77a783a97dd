/**
 * The redeploy split of trainer-ctl eval (issue 26, item 5) on the real Nezha data and the
 * cpu-learn preset's split by fault: the held-out cases with every pod re-hashed, truths under
 * the new names, the training cases untouched, and MicroRank scored on the same re-hashed cases.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { ensureNezhaDataset, NEZHA_DATASET, REPO_ROOT } from '../../../testkit/nezha';
import { loadSplit, type SplitCases } from '../src/eval/splits';

const run = promisify(execFile);
const BIN = join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs');
const scratch = mkdtempSync(join(tmpdir(), 'eval-redeploy-'));
let config: string;
let train: SplitCases;
let held: SplitCases;
let re: SplitCases;

beforeAll(async () => {
  await ensureNezhaDataset();
  const c = parse(readFileSync(join(REPO_ROOT, 'configs', 'cpu-learn.yaml'), 'utf8')) as Record<string, Record<string, unknown>>;
  c.run = { ...c.run, base_dir: REPO_ROOT };
  c.dataset = { ...c.dataset, path: NEZHA_DATASET };
  config = join(scratch, 'cpu-learn.yaml');
  writeFileSync(config, stringify(c));
  train = await loadSplit(NEZHA_DATASET, 'train', config);
  held = await loadSplit(NEZHA_DATASET, 'eval', config);
  re = await loadSplit(NEZHA_DATASET, 'redeploy', config, 5);
}, 300_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the redeploy split', () => {
  it('holds the held-out cases re-hashed, truths and spans under the new names; the training cases keep theirs', () => {
    const names = re.podNames!;
    const oldPods = new Set(names.keys());
    const newPods = new Set(names.values());
    expect(re.cases.map((c) => c.id)).toEqual(held.cases.map((c) => c.id));
    const trainFaults = new Set(train.cases.map((c) => c.fault_id));
    expect(re.cases.filter((c) => trainFaults.has(c.fault_id))).toEqual([]);
    for (const [i, c] of re.cases.entries()) {
      const was = held.cases[i];
      expect(c.truth).toEqual({ ...was.truth, pod: names.get(was.truth.pod!) });
      const pods = re.dataset.traces.trace(c.trace_id).map((s) => s.pod);
      expect(pods).toEqual(held.dataset.traces.trace(was.trace_id).map((s) => names.get(s.pod)));
      expect(pods.every((p) => newPods.has(p))).toBe(true);
    }
    // Training reads the recorded day: its cases, truths and spans under the original names.
    expect(train.podNames).toBeUndefined();
    for (const c of train.cases) {
      expect(oldPods.has(c.truth.pod!)).toBe(true);
      expect(train.dataset.traces.trace(c.trace_id).every((s) => oldPods.has(s.pod))).toBe(true);
    }
  });

  it('scores MicroRank on the re-hashed cases as on the originals, and records the seed', async () => {
    const evalOn = async (split: string) => {
      const out = join(scratch, `microrank-${split}.json`);
      await run(
        process.execPath,
        [
          BIN,
          'eval',
          '--dataset',
          NEZHA_DATASET,
          '--config',
          config,
          '--split',
          split,
          '--redeploy-seed',
          '5',
          '--policy',
          'microrank',
          '--limit',
          '6',
          '--out',
          out,
        ],
        { cwd: scratch, maxBuffer: 1 << 24 },
      );
      return JSON.parse(readFileSync(out, 'utf8')) as {
        split: string;
        redeploy_seed?: number;
        requests: { case_id: string; ranks: unknown; answer: { pod?: string }[] | null }[];
        per_fault: unknown;
        per_request: unknown;
      };
    };
    const a = await evalOn('eval');
    const b = await evalOn('redeploy');
    expect([a.split, a.redeploy_seed, b.split, b.redeploy_seed]).toEqual(['eval', undefined, 'redeploy', 5]);
    expect(b.requests.map((r) => [r.case_id, r.ranks])).toEqual(a.requests.map((r) => [r.case_id, r.ranks]));
    expect([b.per_request, b.per_fault]).toEqual([a.per_request, a.per_fault]);
    const names = re.podNames!;
    const answered = b.requests.flatMap((r) => r.answer ?? []).filter((x) => x.pod);
    expect(answered.length).toBeGreaterThan(0);
    expect(b.requests.map((r) => r.answer)).toEqual(
      a.requests.map((r) => r.answer?.map((x) => (x.pod ? { ...x, pod: names.get(x.pod) } : x)) ?? null),
    );
  }, 300_000);
});
