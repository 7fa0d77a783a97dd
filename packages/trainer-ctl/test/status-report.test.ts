/**
 * `trainer-ctl status RUN_DIR` on a run directory written by the controller's own writers
 * (state, metrics lines, an evaluation) with worker heartbeats in a real Redis: the stage and
 * step, recent metrics, evaluations, live and gone workers, and an unreachable Redis.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendMetrics } from '../src/run-files/metrics-log';
import { formatStatus, RUN_INFO_FILE, runStatus } from '../src/controller/index';
import { initialState, writeState } from '../src/run-files/state';
import { connectRedis, keys, startHeartbeat, type Heartbeat } from '../src/queue/index';
import { REPO_ROOT } from '../../../testkit/nezha';
import { startRedis, type TestRedis } from '../../../testkit/redis';

const CLI = join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs');
let redis: TestRedis;
let runDir: string;
let beat: Heartbeat;

beforeAll(async () => {
  redis = await startRedis();
  runDir = mkdtempSync(join(tmpdir(), 'h11-status-'));
  const state = initialState('status-run', '/models/tiny');
  state.sft = { updates: 2, done: true };
  state.stages.priming = { steps: 3, done: true };
  state.stages.exploration = { steps: 1, done: false };
  state.updates = 5;
  state.policy_version = 5;
  appendMetrics(runDir, { kind: 'sft', stage: 'priming', update: 0, of: 2, train: { loss: 4.5 } });
  for (let step = 0; step < 3; step++) {
    appendMetrics(runDir, {
      kind: 'grpo',
      stage: 'priming',
      step,
      update: 2 + step,
      reward: { mean: 0.25 * step, std: 0 },
      format_valid: 0.5,
      zero_variance_share: 0,
      tool_calls: 2,
      train: { loss: 0.1, kl: 0.01 },
    });
  }
  appendMetrics(runDir, {
    kind: 'grpo',
    stage: 'exploration',
    step: 0,
    update: 5,
    reward: { mean: 0.9, std: 0 },
    format_valid: 1,
    zero_variance_share: 0.5,
    tool_calls: 3,
    train: { loss: 0.2, kl: 0.02 },
  });
  // A line past the state's count: written by a step that never completed.
  appendMetrics(runDir, {
    kind: 'grpo',
    stage: 'exploration',
    step: 1,
    update: 6,
    reward: { mean: 7, std: 0 },
    format_valid: 1,
    zero_variance_share: 0,
    tool_calls: 3,
    train: {},
  });
  state.metrics_lines = 5;
  writeState(runDir, state);
  writeFileSync(
    join(runDir, 'eval-priming.json'),
    JSON.stringify({
      name: 'priming',
      policy_version: 4,
      format_valid: 0.875,
      summary: {
        levels: ['service'],
        per_request: {},
        per_fault: { service: { n: 8, recall: {}, mrr: 0.4375, found: 4 } },
        faults_without_cases: [],
      },
    }),
  );
  writeFileSync(join(runDir, RUN_INFO_FILE), JSON.stringify({ run_id: 'status-run', redis_url: redis.url }));
  const conn = connectRedis(redis.url);
  beat = await startHeartbeat(conn, 'status-run', 'rollout-a', 'rollout', 1000);
  await conn.hset(
    keys.workers('status-run'),
    'train-b',
    JSON.stringify({ kind: 'train', pid: 1, host: 'h', last_seen: Date.now() - 600_000 }),
  );
});

afterAll(async () => {
  await beat?.stop();
  await redis?.stop();
  rmSync(runDir, { recursive: true, force: true });
});

describe('status', () => {
  it('reports stage, step, completed metrics only, evaluations and which workers are alive', async () => {
    const s = await runStatus(runDir, { tail: 3 });
    expect(s.stage).toBe('exploration');
    expect(s.recent.map((m) => `${m.stage}:${m.step}`)).toEqual(['priming:1', 'priming:2', 'exploration:0']);
    expect(s.workers!.map((w) => [w.id, w.alive])).toEqual([
      ['rollout-a', true],
      ['train-b', false],
    ]);
    const text = formatStatus(s);
    expect(text).toContain('stage: exploration');
    expect(text).toContain('step: 1 done in exploration');
    expect(text).toContain('updates: 5, policy v5');
    expect(text).toContain('eval priming: policy v4, format validity 0.875, per-fault MRR (service) 0.438');
    expect(text).toContain('exploration step 0 (update 5): reward 0.900');
    expect(text).not.toContain('reward 7');
    expect(text).toContain('workers alive: 1');
    expect(text).toMatch(/train-b train pid 1 on h: last seen \d+ s ago \(gone\)/);
  });

  it("says when the run's Redis cannot be reached", async () => {
    const s = await runStatus(runDir, { redisUrl: 'redis://127.0.0.1:1' });
    expect(s.workers).toBeUndefined();
    expect(formatStatus(s)).toMatch(/workers: Redis redis:\/\/127\.0\.0\.1:1 not reachable/);
  });

  it('runs as `trainer-ctl status`, and names a directory that is not a run', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [CLI, 'status', runDir, '--tail', '1'], { cwd: REPO_ROOT });
    expect(stdout).toContain('run status-run');
    expect(stdout).toContain('exploration step 0');
    expect(stdout).not.toContain('priming step 2');
    const empty = mkdtempSync(join(tmpdir(), 'h11-status-empty-'));
    const r = await promisify(execFile)(process.execPath, [CLI, 'status', empty], { cwd: REPO_ROOT }).catch(
      (e: { code: number; stderr: string }) => e,
    );
    rmSync(empty, { recursive: true });
    expect('code' in r && r.code).toBe(2);
    expect((r as { stderr: string }).stderr).toContain('no state.json');
  });
});
