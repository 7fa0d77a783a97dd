/**
 * The queue layer on a real redis-server: group slots (a retried sample replaces its slot,
 * waits end when all G are in, or time out naming what is missing), rollout job ids that make
 * a re-enqueue a no-op, train results read when the job ends (not at the next poll),
 * weight-sync waits with a hard timeout, and worker heartbeats.
 */
import { Worker } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createExpert, ExpertSettingsSchema, loadDataset, runEpisode, type Dataset, type EpisodeRecord } from '@thinkfl/env';
import {
  connectRedis,
  GroupStore,
  GroupTimeoutError,
  keys,
  listWorkers,
  parseQueueSettings,
  PolicyRegistry,
  PolicySyncTimeoutError,
  RolloutQueue,
  rolloutJobId,
  startHeartbeat,
  TrainQueue,
  type RolloutJob,
  type TrainJob,
  type TrainResult,
  type Trajectory,
} from '../src/queue/index';
import { startRedis, type TestRedis } from '../../../testkit/redis';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import type { Redis } from 'ioredis';

let redis: TestRedis;
let conn: Redis;
let dataset: Dataset;
const episodes: EpisodeRecord[] = [];
const RUN = 'queue-test';

/** A trajectory around a real expert episode (token ids are the worker's business, not the store's). */
function trajectory(groupId: string, sampleIndex: number, workerId: string): Trajectory {
  const episode = episodes[sampleIndex % episodes.length];
  return {
    group_id: groupId,
    case_id: episode.case_id,
    sample_index: sampleIndex,
    policy_version: 0,
    ids: [1, 2, 3],
    mask: [0, 1, 1],
    logprobs: [0, -0.5, -0.25],
    temperature: 1,
    episode,
    worker_id: workerId,
    timing: { generate_ms: 0, tools_ms: 1, wall_ms: 1 },
  };
}

beforeAll(async () => {
  redis = await startRedis();
  conn = connectRedis(redis.url);
  dataset = await loadDataset(await ensureNezhaDataset());
  const expert = createExpert(dataset, ExpertSettingsSchema.parse({}));
  for (const c of dataset.cases.slice(0, 2)) episodes.push(await runEpisode({ dataset, case: c, policy: expert, settings: { d_max: 4 } }));
}, 300_000);
afterAll(async () => {
  conn?.disconnect();
  await redis?.stop();
});

describe('GroupStore', () => {
  it('keeps one slot per sample index: a retried sample replaces its slot', async () => {
    const store = new GroupStore(conn, RUN);
    await store.put(trajectory('g-replace', 1, 'w1'));
    await store.put(trajectory('g-replace', 0, 'w1'));
    await store.put(trajectory('g-replace', 1, 'w2'));
    expect(await store.count('g-replace')).toBe(2);
    const read = await store.read('g-replace');
    expect(read.map((t) => [t.sample_index, t.worker_id])).toEqual([
      [0, 'w1'],
      [1, 'w2'],
    ]);
    expect(read[0].episode.case_id).toBe(dataset.cases[0].id);
    await store.delete(['g-replace']);
    expect(await conn.exists(keys.group(RUN, 'g-replace'))).toBe(0);
    await store.close();
  });

  it('wakes a waiter when the last sample arrives, and returns the group in sample order', async () => {
    const store = new GroupStore(conn, RUN, 60_000);
    const writer = new GroupStore(conn, RUN);
    await writer.put(trajectory('g-wait', 2, 'w1'));
    const waiting = store.waitComplete('g-wait', 3, 30_000);
    await writer.put(trajectory('g-wait', 0, 'w1'));
    await writer.put(trajectory('g-wait', 0, 'w2'));
    await writer.put(trajectory('g-wait', 1, 'w1'));
    // recheckMs is 60 s, so only the pub/sub announcement can wake the waiter before the timeout.
    const group = await waiting;
    expect(group.map((t) => t.sample_index)).toEqual([0, 1, 2]);
    expect(group[0].worker_id).toBe('w2');
    await Promise.all([store.close(), writer.close()]);
  });

  it('times out naming the missing sample indices', async () => {
    const store = new GroupStore(conn, RUN);
    await store.put(trajectory('g-missing', 0, 'w1'));
    await store.put(trajectory('g-missing', 3, 'w1'));
    const err = await store.waitComplete('g-missing', 4, 300).catch((e: Error) => e);
    expect(err).toBeInstanceOf(GroupTimeoutError);
    expect((err as Error).message).toMatch(/group g-missing: 2 of 4 samples after 300 ms; missing sample indices 1, 2/);
    await store.close();
  });
});

describe('RolloutQueue', () => {
  const settings = parseQueueSettings({});
  const jobs = (groupId: string): RolloutJob[] =>
    [0, 1, 2].map((sampleIndex) => ({
      run_id: RUN,
      stage: 'priming',
      step: 0,
      group_id: groupId,
      case_id: dataset.cases[0].id,
      sample_index: sampleIndex,
      policy_version: 0,
      temperature: 1,
      seed: sampleIndex,
    }));

  it('adds nothing when the same (group, sample) jobs are enqueued again', async () => {
    const q = new RolloutQueue(conn, RUN, settings);
    await q.enqueueGroup(jobs('g-dedup'));
    await q.enqueueGroup(jobs('g-dedup'));
    await q.enqueueGroup(jobs('g-dedup').slice(1));
    const counts = await q.queue.getJobCounts('waiting', 'active', 'completed', 'failed', 'delayed');
    expect(counts.waiting).toBe(3);
    expect((await q.queue.getJob(rolloutJobId('g-dedup', 2)))?.data.sample_index).toBe(2);
    await q.dropGroups([{ groupId: 'g-dedup', size: 3 }]);
    expect((await q.queue.getJobCounts('waiting')).waiting).toBe(0);
    await q.close();
  });

  it('rejects ids BullMQ cannot take, and jobs of another run', async () => {
    expect(() => rolloutJobId('a:b', 0)).toThrow(/must not contain ':'/);
    expect(() => rolloutJobId('g', -1)).toThrow(/non-negative integer/);
    const q = new RolloutQueue(conn, RUN, settings);
    await expect(q.enqueueGroup([{ ...jobs('g')[0], run_id: 'other' }])).rejects.toThrow(/run id other, queue belongs to queue-test/);
    await q.close();
  });
});

describe('TrainQueue', () => {
  it('hands the waiter a train result, or a failure, when the job ends rather than at its next poll', async () => {
    // A poll interval far beyond the test's timeout: only the job's own events can end these waits.
    const settings = parseQueueSettings({ pollMs: 3_600_000, attempts: 1 });
    const queue = new TrainQueue(conn, RUN, settings);
    const workerConn = conn.duplicate();
    const worker = new Worker<TrainJob, TrainResult>(
      keys.trainQueue(RUN),
      async (j) => {
        if (j.data.update === 1) throw new Error('the engine refused the batch');
        return { update: j.data.update, version: j.data.update + 1, policy_dir: `policies/v${j.data.update + 1}`, metrics: { loss: 0.5 } };
      },
      { connection: workerConn, prefix: settings.prefix, concurrency: 1, autorun: false },
    );
    try {
      await queue.submit({ run_id: RUN, stage: 'priming', update: 0, kind: 'grpo', samples: [], checkpoint: false });
      await queue.submit({ run_id: RUN, stage: 'priming', update: 1, kind: 'grpo', samples: [], checkpoint: false });
      const ok = queue.waitResult(0, 60_000);
      const bad = queue.waitResult(1, 60_000);
      // Both waits have read the state ('waiting') and sleep before the jobs run.
      await new Promise((r) => setTimeout(r, 200));
      void worker.run();
      await expect(ok).resolves.toEqual({ update: 0, version: 1, policy_dir: 'policies/v1', metrics: { loss: 0.5 } });
      await expect(bad).rejects.toThrow(/failed after 1 attempt\(s\): the engine refused the batch/);
    } finally {
      await worker.close();
      workerConn.disconnect();
      await queue.close();
    }
  }, 30_000);
});

describe('PolicyRegistry', () => {
  it('resolves a wait once the version is published', async () => {
    const reg = new PolicyRegistry(conn, 'sync-ok');
    await reg.publish({ version: 0, dir: '/policies/v0' });
    const waiting = reg.waitFor(2, 30_000);
    await reg.publish({ version: 1, dir: '/policies/v1' });
    await reg.publish({ version: 2, dir: '/policies/v2' });
    expect(await waiting).toEqual({ version: 2, dir: '/policies/v2' });
    expect(await reg.waitFor(1, 10)).toEqual({ version: 2, dir: '/policies/v2' });
  });

  it('gives up after the hard timeout with what it waited for and what was there', async () => {
    const reg = new PolicyRegistry(conn, 'sync-late');
    await reg.publish({ version: 3, dir: '/policies/v3' });
    const err = await reg.waitFor(4, 250).catch((e: Error) => e);
    expect(err).toBeInstanceOf(PolicySyncTimeoutError);
    expect((err as Error).message).toBe(
      'weight sync timed out after 250 ms: waiting for policy version 4 of run sync-late, newest published is version 3 (/policies/v3); is the train worker running?',
    );
    const none = await new PolicyRegistry(conn, 'sync-none').waitFor(0, 100).catch((e: Error) => e);
    expect((none as Error).message).toMatch(/newest published is none/);
  });
});

describe('heartbeats', () => {
  it('registers a worker while it beats and removes it when stopped', async () => {
    const before = Date.now();
    const beat = await startHeartbeat(conn, RUN, 'rollout-a', 'rollout', 60_000);
    const [w] = await listWorkers(conn, RUN);
    expect(w).toMatchObject({ id: 'rollout-a', kind: 'rollout', pid: process.pid });
    expect(w.last_seen).toBeGreaterThanOrEqual(before);
    expect(w.last_seen).toBeLessThanOrEqual(Date.now());
    await beat.stop();
    expect(await listWorkers(conn, RUN)).toEqual([]);
  });
});
