/**
 * The train worker's update runner on its own, without BullMQ: a real engine on a real tiny
 * model (engine-supervisor.ts), real Nezha expert episodes as samples, and the result store and
 * policy registry on a real redis-server. Jobs are handed to run() directly and the jobs an
 * engine restart takes again come from a map. It publishes the base policy as v0 and each update
 * as v<update+1>, answers a done update from its stored result, refuses one from the future;
 * an engine SIGKILLed between updates is started again from the checkpoint and the update that
 * follows equals the unbroken run's (a second runner that never lost its engine); a restart that
 * needs a job that is gone, and a death past workers.train.engine_restarts, fail for good.
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { loadDataset } from '@thinkfl/env';
import type { LoadedRunConfig, RunConfig } from '../src/config/index';
import { connectRedis, PolicyRegistry, TrainResultStore, type TrainJob, type TrainResult, type TrainSample } from '../src/queue/index';
import {
  checkpointDir,
  EngineSupervisor,
  listCheckpoints,
  PermanentJobError,
  TRAINER_STATE_FILE,
  UpdateRunner,
} from '../src/workers/index';
import { startRedis, type TestRedis } from '../../../testkit/redis';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { expertSamples, scratch, writeRunConfig } from './workers-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';

let redis: TestRedis;
let conn: Redis;
let dir: string | undefined;
let model: string;
let samples: TrainSample[];

beforeAll(async () => {
  redis = await startRedis();
  conn = connectRedis(redis.url);
  const dataset = await loadDataset(await ensureNezhaDataset());
  dir = scratch('update-runner');
  model = await createTinyModel(join(dir, 'model'), 5);
  samples = await expertSamples(dataset, model, [1, -1]);
}, 600_000);
afterAll(async () => {
  conn?.disconnect();
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface Started {
  loaded: LoadedRunConfig;
  supervisor: EngineSupervisor;
  runner: UpdateRunner;
  /** The jobs run so far, by update: what an engine restart takes again. */
  jobs: Map<number, TrainJob>;
  /** Runs the job of `update` (a checkpoint after it when `checkpoint`). */
  update(update: number, checkpoint?: boolean): Promise<TrainResult>;
  logs: string[];
  deaths: Error[];
}

/** A runner on a new run directory `run`, its engine on the base model and v0 published. */
async function start(run: string, tweak: (c: RunConfig) => RunConfig = (c) => c): Promise<Started> {
  const loaded = writeRunConfig(dir!, run, model, '', { file: `${run}.yaml`, train: '{ autocast: float32 }' });
  const config = tweak(loaded.config);
  const logs: string[] = [];
  const deaths: Error[] = [];
  const log = (l: string) => logs.push(l);
  const supervisor = new EngineSupervisor({ config, runDir: loaded.runDir, log });
  const jobs = new Map<number, TrainJob>();
  const runner = new UpdateRunner({
    config,
    runDir: loaded.runDir,
    supervisor,
    updates: await supervisor.open(undefined),
    results: new TrainResultStore(conn, run),
    registry: new PolicyRegistry(conn, run),
    jobOf: async (u) => jobs.get(u),
    onEngineDeath: (e) => deaths.push(e),
    log,
  });
  await runner.publishCurrent();
  const update = (u: number, checkpoint = false) => {
    const job: TrainJob = { run_id: run, stage: 'priming', update: u, kind: 'grpo', samples, checkpoint };
    jobs.set(u, job);
    return runner.run(job);
  };
  return { loaded, supervisor, runner, jobs, update, logs, deaths };
}

async function kill(s: Started): Promise<void> {
  process.kill(s.supervisor.pid!, 'SIGKILL');
  await s.supervisor.engine.exited;
}

describe('update runner', () => {
  it('publishes v0 and v<update+1> per update, answers a done update from its stored result, refuses one from the future', async () => {
    const s = await start('runner-order');
    const registry = new PolicyRegistry(conn, 'runner-order');
    try {
      const v0 = join(s.loaded.runDir, 'policies', 'v0');
      expect(await registry.current()).toEqual({ version: 0, dir: v0 });
      expect(existsSync(join(v0, 'onnx', 'model.onnx'))).toBe(true);

      const first = await s.update(0);
      expect(first).toMatchObject({ update: 0, version: 1, policy_dir: join(s.loaded.runDir, 'policies', 'v1') });
      expect(first.metrics.step).toBe(1);
      expect(Number.isFinite(first.metrics.loss)).toBe(true);
      expect(first.engine_checkpoint).toBeUndefined();
      expect(await registry.current()).toEqual({ version: 1, dir: first.policy_dir });
      expect(s.runner.updates).toBe(1);

      // Again: the stored result, and no optimizer step (the next update is the second one).
      expect(await s.update(0)).toEqual(first);
      expect(s.logs).toContain('update 0 was done before; returning its stored result');
      const refused = s.update(3);
      await expect(refused).rejects.toBeInstanceOf(PermanentJobError);
      await expect(refused).rejects.toThrow('train job update 3: the engine has done 1 updates; submit update 1 first');

      const second = await s.update(1, true);
      expect(second).toMatchObject({ update: 1, version: 2, checkpoint_dir: checkpointDir(s.loaded.runDir, 2) });
      expect(second.metrics.step).toBe(2);
      expect(JSON.parse(readFileSync(join(second.checkpoint_dir!, TRAINER_STATE_FILE), 'utf8')).updates).toBe(2);
      expect(listCheckpoints(s.loaded.runDir).map((c) => c.updates)).toEqual([2]);
    } finally {
      await s.supervisor.shutdown();
    }
  }, 600_000);

  it('restarts an engine killed between updates from the checkpoint and gives the unbroken update; fails for good when it cannot', async () => {
    const unbroken = await start('runner-unbroken');
    const expected: TrainResult[] = [];
    try {
      for (const u of [0, 1, 2, 3]) expected.push(await unbroken.update(u, u === 1));
    } finally {
      await unbroken.supervisor.shutdown();
    }

    const s = await start('runner-killed');
    try {
      for (const u of [0, 1, 2]) await s.update(u, u === 1);
      const killed = s.supervisor.pid;
      await kill(s);
      // The new engine loads the checkpoint after update 1, takes update 2 again from its job, then makes update 3.
      const fourth = await s.update(3);
      expect(s.supervisor.pid).not.toBe(killed);
      expect(s.logs.some((l) => /^engine died during update 3 .*restarting it from the latest checkpoint \(1 of 2\)$/.test(l))).toBe(true);
      expect(fourth).toMatchObject({ update: 3, version: 4, engine_checkpoint: checkpointDir(s.loaded.runDir, 2) });
      expect(fourth.metrics.step).toBe(expected[3].metrics.step);
      expect(fourth.metrics.loss).toBe(expected[3].metrics.loss);
      expect(fourth.metrics.grad_norm).toBe(expected[3].metrics.grad_norm);
      expect(s.deaths).toEqual([]);

      // Update 3's job is gone: the engine cannot be rebuilt for update 4.
      s.jobs.delete(3);
      await kill(s);
      const lost = s.update(4);
      await expect(lost).rejects.toBeInstanceOf(PermanentJobError);
      await expect(lost).rejects.toThrow(
        'engine restart: the train job of update 3 is gone, so update 4 cannot be rebuilt; resume the run',
      );
    } finally {
      await s.supervisor.shutdown();
    }

    const once = await start('runner-no-restarts', (c) => ({
      ...c,
      workers: { ...c.workers, train: { ...c.workers.train, engine_restarts: 0 } },
    }));
    try {
      await kill(once);
      const died = once.update(0);
      await expect(died).rejects.toBeInstanceOf(PermanentJobError);
      await expect(died).rejects.toThrow(/^train engine died \(workers.train.engine_restarts 0\): .*SIGKILL/);
      // The worker's owner hears of it once, with the same words.
      expect(once.deaths).toHaveLength(1);
      await expect(died).rejects.toThrow(once.deaths[0].message);
    } finally {
      await once.supervisor.shutdown();
    }
  }, 900_000);
});
