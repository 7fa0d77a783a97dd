import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { camelCaseKeys } from '../../../testkit/camel-keys';
import { ensureNezhaDataset, REPO_ROOT } from '../../../testkit/nezha';

const run = promisify(execFile);
const BIN = join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs');
let dataset: string;
let dir: string;

beforeAll(async () => {
  dataset = await ensureNezhaDataset();
  dir = mkdtempSync(join(tmpdir(), 'eval-cmd-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function evalCli(args: string[]) {
  return run(process.execPath, [BIN, 'eval', '--dataset', dataset, ...args], { cwd: dir, maxBuffer: 1 << 24 });
}

describe('trainer-ctl eval', () => {
  it.each(['expert', 'microrank', 'selftime'])('runs %s on the real dataset with --limit and writes the full results', async (policy) => {
    const out = join(dir, `${policy}.json`);
    const { stdout, stderr } = await evalCli(['--policy', policy, '--limit', '6', '--out', out]);
    for (const scope of ['per request, service', 'per fault, service', 'per request, pod', 'per fault, pod']) {
      expect(stdout).toMatch(new RegExp(`${scope}\\s+\\d+(\\s+\\d+\\.\\d\\d){5}\\s+\\d\\.\\d{4}`));
    }
    expect(stdout).toContain('R@1');
    expect(stdout).toContain(`results: ${out}`);
    // Progress goes to stderr, never into the table.
    expect(stderr).toMatch(new RegExp(`eval ${policy} 6/6 100%`));
    expect(stdout).not.toMatch(/eta/);

    const json = JSON.parse(readFileSync(out, 'utf8'));
    expect(camelCaseKeys(json, out)).toEqual([]);
    expect(json.policy).toBe(policy);
    expect(json.protocol).toBe(policy === 'expert' ? 'rot' : null);
    expect(json.cases).toBe(6);
    expect(json.levels).toEqual(['service', 'pod']);
    expect(json.requests).toHaveLength(6);
    expect(new Set(json.requests.map((r: { fault_id: string }) => r.fault_id)).size).toBe(6);
    for (const r of json.requests) {
      expect(r).toHaveProperty('ranks.service');
      expect(Array.isArray(r.answer)).toBe(true);
    }
    expect(json.faults).toHaveLength(6);
    for (const level of ['service', 'pod']) {
      for (const scope of [json.per_request[level], json.per_fault[level]]) {
        expect(Object.keys(scope.recall)).toEqual(['1', '2', '3', '5', '10']);
        expect(scope.mrr).toBeGreaterThanOrEqual(0);
        expect(scope.mrr).toBeLessThanOrEqual(1);
      }
    }
    if (policy === 'expert') expect(json.requests.every((r: { stop_reason: string }) => r.stop_reason === 'answered')).toBe(true);
  });

  it('writes under runs/ by default', async () => {
    const { stdout } = await evalCli(['--policy', 'selftime', '--limit', '2']);
    expect(stdout).toMatch(new RegExp(`results: ${dir}/runs/eval-selftime-\\d{4}-\\d\\d-\\d\\dT[\\d-]+Z\\.json`));
  });

  it('refuses an unknown policy and a bad limit with a clear message', async () => {
    await expect(evalCli(['--policy', 'oracle'])).rejects.toMatchObject({ stderr: expect.stringMatching(/Choices: .*"expert"/) });
    await expect(evalCli(['--policy', 'selftime', '--limit', '0'])).rejects.toMatchObject({
      stderr: expect.stringMatching(/--limit must be a positive integer/),
    });
  });

  it('names the dataset directory when it is not a dataset', async () => {
    await expect(run(process.execPath, [BIN, 'eval', '--dataset', dir, '--policy', 'selftime'], { cwd: dir })).rejects.toMatchObject({
      stderr: expect.stringContaining(dir),
    });
  });
});
