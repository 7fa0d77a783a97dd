/**
 * Two `trainer-ctl worker rollout` processes play a group of G real Nezha episodes with a real
 * tiny model; the first one to start a job is SIGKILLed mid-episode. Its job is detected as
 * stalled and replayed by the other worker: the group ends with exactly G samples, one per
 * sample index, and enqueueing the same jobs again adds nothing.
 */
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { loadDataset, type Dataset } from '@thinkfl/env';
import {
  connectRedis,
  GroupStore,
  keys,
  listWorkers,
  parseQueueSettings,
  PolicyRegistry,
  RolloutQueue,
  type RolloutJob,
} from '../src/queue/index';
import { startRedis, type TestRedis } from '../../../testkit/redis';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { scratch, spawnWorker, writeRunConfig, type WorkerProcess } from './workers-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';

const RUN = 'kill-test';
const G = 4;
let redis: TestRedis;
let dir: string | undefined;
let conn: Redis;
let dataset: Dataset;
let configFile: string;
const workers: WorkerProcess[] = [];

beforeAll(async () => {
  redis = await startRedis();
  conn = connectRedis(redis.url);
  dataset = await loadDataset(await ensureNezhaDataset());
  dir = scratch('kill');
  const model = await createTinyModel(`${dir}/model`, 1);
  configFile = writeRunConfig(dir, RUN, model).file;
  // Version 0 is the model as created; the train worker would publish it the same way.
  await new PolicyRegistry(conn, RUN).publish({ version: 0, dir: model });
}, 600_000);
afterAll(async () => {
  for (const w of workers) if (w.child.exitCode === null && w.child.signalCode === null) w.child.kill('SIGKILL');
  conn?.disconnect();
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const startLines = (w: WorkerProcess, jobId?: string) =>
  w.lines.filter((l) => / start /.test(l) && (!jobId || l.includes(` start ${jobId} `)));

describe('rollout workers under SIGKILL', () => {
  it('completes the group with exactly G samples, the killed job replayed once by the survivor', async () => {
    for (const id of ['A', 'B']) {
      workers.push(
        spawnWorker([
          'rollout',
          '--config',
          configFile,
          '--redis',
          redis.url,
          '--id',
          id,
          '--concurrency',
          '1',
          '--lock-duration-ms',
          '5000',
          '--stalled-interval-ms',
          '1000',
        ]),
      );
    }
    await Promise.all(workers.map((w) => w.waitLine(/ready on/)));

    const kase = dataset.cases[0];
    const jobs: RolloutJob[] = [...Array(G).keys()].map((sampleIndex) => ({
      run_id: RUN,
      stage: 'priming',
      step: 0,
      group_id: 'kill-g',
      case_id: kase.id,
      sample_index: sampleIndex,
      policy_version: 0,
      temperature: 1,
      seed: 100 + sampleIndex,
    }));
    const queue = new RolloutQueue(conn, RUN, parseQueueSettings({}));
    await queue.enqueueGroup(jobs);

    // Kill whichever worker starts a job first, as soon as it says so: mid-episode.
    const first = await Promise.race(workers.map((w, i) => w.waitLine(/ start kill-g#\d /).then((line) => ({ i, line }))));
    const victim = workers[first.i];
    const survivor = workers[1 - first.i];
    victim.child.kill('SIGKILL');
    expect((await victim.exited).signal).toBe('SIGKILL');
    const victimJob = / start (kill-g#\d) /.exec(first.line)![1];

    const store = new GroupStore(conn, RUN);
    const group = await store.waitComplete('kill-g', G, 240_000);

    // Exactly one sample per index, and nothing else in the hash.
    expect(await conn.hlen(keys.group(RUN, 'kill-g'))).toBe(G);
    expect(await store.indices('kill-g')).toEqual([0, 1, 2, 3]);
    expect(group.map((t) => t.sample_index)).toEqual([0, 1, 2, 3]);
    const survivorId = first.i === 0 ? 'B' : 'A';
    expect(group.every((t) => t.worker_id === survivorId)).toBe(true);

    // The killed job ran twice (killed, then replayed), every other job once.
    expect(victim.lines.some((l) => l.includes(` done ${victimJob} `))).toBe(false);
    expect(startLines(survivor, victimJob)).toHaveLength(1);
    expect(startLines(victim).length + startLines(survivor).length).toBe(G + 1);
    // The last sample is stored just before BullMQ marks its job completed.
    const settled = async () => {
      for (;;) {
        const c = await queue.queue.getJobCounts('completed', 'failed', 'waiting', 'active', 'delayed');
        if (c.active === 0) return c;
        await new Promise((r) => setTimeout(r, 50));
      }
    };
    expect(await settled()).toMatchObject({ completed: G, failed: 0, waiting: 0, active: 0, delayed: 0 });

    // Real trajectories: token-aligned, with model-generated tokens, of the job's case and version.
    for (const t of group) {
      expect(t.case_id).toBe(kase.id);
      expect(t.episode.case_id).toBe(kase.id);
      expect(t.policy_version).toBe(0);
      expect(t.mask).toHaveLength(t.ids.length);
      expect(t.logprobs).toHaveLength(t.ids.length);
      expect(t.mask.some((m) => m === 1)).toBe(true);
      expect(t.logprobs.every((lp, k) => (t.mask[k] === 1 ? lp <= 0 : lp === 0))).toBe(true);
      expect(t.episode.turns.length).toBeGreaterThan(0);
    }

    // Enqueueing the same job ids again adds nothing: no job waits, the group keeps G samples.
    await queue.enqueueGroup(jobs);
    expect(await queue.queue.getJobCounts('completed', 'waiting', 'delayed')).toMatchObject({ completed: G, waiting: 0, delayed: 0 });
    expect(await conn.hlen(keys.group(RUN, 'kill-g'))).toBe(G);

    // SIGTERM: the survivor closes cleanly and leaves the worker registry; the killed one could not.
    survivor.child.kill('SIGTERM');
    expect(await survivor.exited).toEqual({ code: 0, signal: null });
    expect((await listWorkers(conn, RUN)).map((w) => w.id)).toEqual([first.i === 0 ? 'A' : 'B']);
    await Promise.all([queue.close(), store.close()]);
  }, 420_000);
});
