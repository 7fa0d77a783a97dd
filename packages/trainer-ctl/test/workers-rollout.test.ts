/**
 * The rollout worker's queue side on a real redis-server, with players that fail on purpose
 * around real expert trajectories: a timed-out attempt is retried and its late result is
 * dropped, a throwing player is retried with backoff, an unrecoverable error fails at once
 * with its reason.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Redis } from 'ioredis';
import { UnrecoverableError } from 'bullmq';
import { createExpert, ExpertSettingsSchema, loadDataset, runEpisode, type EpisodeRecord } from '@thinkfl/env';
import { connectRedis, GroupStore, parseQueueSettings, RolloutQueue, rolloutJobId, type RolloutJob } from '../src/queue/index';
import { startRolloutWorker, type RolloutPlayer } from '../src/workers/index';
import { startRedis, type TestRedis } from '../../../testkit/redis';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { plainTrajectory } from './workers-fixtures';

let redis: TestRedis;
let conn: Redis;
let episode: EpisodeRecord;
const settings = parseQueueSettings({ attempts: 3, backoffMs: 10 });

const job = (run: string, groupId: string, sampleIndex: number): RolloutJob => ({
  run_id: run,
  stage: 'priming',
  step: 0,
  group_id: groupId,
  case_id: episode.case_id,
  sample_index: sampleIndex,
  policy_version: 0,
  temperature: 1,
  seed: sampleIndex,
});
const sample = (j: RolloutJob, ids: number[]) => plainTrajectory(j, ids, episode);

async function withWorker<T>(
  run: string,
  play: RolloutPlayer,
  jobTimeoutMs: number,
  f: (q: RolloutQueue, s: GroupStore) => Promise<T>,
): Promise<T> {
  const worker = await startRolloutWorker({ connection: conn, runId: run, workerId: 'w', settings, concurrency: 2, jobTimeoutMs, play });
  const queue = new RolloutQueue(conn, run, settings);
  const store = new GroupStore(conn, run);
  try {
    return await f(queue, store);
  } finally {
    await Promise.all([worker.close(), queue.close(), store.close()]);
  }
}

beforeAll(async () => {
  redis = await startRedis();
  conn = connectRedis(redis.url);
  const dataset = await loadDataset(await ensureNezhaDataset());
  episode = await runEpisode({
    dataset,
    case: dataset.cases[0],
    policy: createExpert(dataset, ExpertSettingsSchema.parse({})),
    settings: { d_max: 4 },
  });
}, 300_000);
afterAll(async () => {
  conn?.disconnect();
  await redis?.stop();
});

describe('rollout worker', () => {
  it('retries an attempt that outlives the job timeout and never stores its late result', async () => {
    let release: () => void = () => undefined;
    const late = new Promise<void>((r) => (release = r));
    const runs: number[] = [];
    const play: RolloutPlayer = async (j) => {
      runs.push(j.sample_index);
      if (j.sample_index === 1 && runs.filter((i) => i === 1).length === 1) {
        await late;
        return sample(j, [9, 9, 9]);
      }
      return sample(j, [1, 2]);
    };
    await withWorker('timeout-run', play, 300, async (queue, store) => {
      await queue.enqueueGroup([0, 1].map((i) => job('timeout-run', 'g', i)));
      const group = await store.waitComplete('g', 2, 60_000);
      expect(group.map((t) => t.ids)).toEqual([
        [1, 2],
        [1, 2],
      ]);
      expect(runs.filter((i) => i === 1)).toHaveLength(2);
      const retried = await queue.queue.getJob(rolloutJobId('g', 1));
      expect(retried?.attemptsMade).toBe(2);
      // The abandoned attempt finishes now; its result must not replace the stored sample.
      release();
      await late;
      await new Promise((r) => setTimeout(r, 100));
      expect((await store.read('g')).map((t) => t.ids)).toEqual([
        [1, 2],
        [1, 2],
      ]);
    });
  });

  it('retries a throwing player with backoff, and fails an unrecoverable job at once with its reason', async () => {
    const tries = new Map<number, number>();
    const play: RolloutPlayer = async (j) => {
      const n = (tries.get(j.sample_index) ?? 0) + 1;
      tries.set(j.sample_index, n);
      if (j.sample_index === 0 && n < 3) throw new Error(`transient failure ${n}`);
      if (j.sample_index === 1) throw new UnrecoverableError('case is not in the dataset');
      return sample(j, [4, 5]);
    };
    await withWorker('retry-run', play, 60_000, async (queue, store) => {
      await queue.enqueueGroup([0, 1].map((i) => job('retry-run', 'g', i)));
      const err = await store.waitComplete('g', 2, 2_000).catch((e: Error) => e);
      expect((err as Error).message).toMatch(/group g: 1 of 2 samples after 2000 ms; missing sample indices 1$/);
      expect(tries.get(0)).toBe(3);
      expect(tries.get(1)).toBe(1);
      expect(await queue.failure('g', 1)).toBe('case is not in the dataset');
      expect(await queue.failure('g', 0)).toBeUndefined();
    });
  });
});
