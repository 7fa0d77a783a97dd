/**
 * The rollout worker's queue side: a BullMQ Worker on the run's rollout queue that hands each
 * job to a player and stores the trajectory in its group's slot. Playing is the player's
 * business (episode-player.ts); a replayed job overwrites the same slot.
 */
import { UnrecoverableError, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { DiskError } from '../disk-errors';
import { withTimeout } from '../queue/with-timeout';
import { GroupStore, type TrajectoryFiles } from '../queue/group-store';
import { isConnectionError } from '../queue/connection';
import { startHeartbeat, type Heartbeat } from '../queue/heartbeats';
import { keys, type RolloutJob, type Trajectory } from '../queue/jobs';
import { rolloutJobId } from '../queue/rollout-queue';
import type { QueueSettings } from '../queue/settings';

/** Plays one job; the worker adds its own id to the trajectory. */
export type RolloutPlayer = (job: RolloutJob) => Promise<Omit<Trajectory, 'worker_id'>>;

export interface RolloutWorkerOptions {
  connection: Redis;
  runId: string;
  workerId: string;
  settings: QueueSettings;
  /** Jobs played at once. */
  concurrency: number;
  /**
   * A job still playing after this long fails its attempt and is retried (workers.rollout.job_timeout_s).
   * The abandoned episode's result is never stored. Default 600000 (the config's default).
   */
  jobTimeoutMs?: number;
  play: RolloutPlayer;
  /** Where long trajectories go (the run's data directory); absent: stored inline in Redis. */
  files?: TrajectoryFiles;
  log?: (line: string) => void;
  /** Called when the worker can take no more jobs: the run directory is full or read-only. */
  onFatal?: (err: Error) => void;
}

export interface RolloutWorker {
  readonly worker: Worker<RolloutJob>;
  /** Stops taking jobs, waits for running ones, leaves the worker registry. */
  close(): Promise<void>;
}

export async function startRolloutWorker(opts: RolloutWorkerOptions): Promise<RolloutWorker> {
  const log = opts.log ?? (() => undefined);
  const jobTimeoutMs = opts.jobTimeoutMs ?? 600_000;
  const store = new GroupStore(opts.connection, opts.runId, undefined, opts.files);
  const worker = new Worker<RolloutJob>(
    keys.rolloutQueue(opts.runId),
    async (job) => {
      const j = job.data;
      const id = rolloutJobId(j.group_id, j.sample_index);
      log(`start ${id} attempt ${job.attemptsMade + 1} stalled ${job.stalledCounter} policy v${j.policy_version}`);
      const t = await withTimeout(opts.play(j), jobTimeoutMs, () => `rollout job ${id}: episode not finished after ${jobTimeoutMs} ms`);
      try {
        await store.put({ ...t, worker_id: opts.workerId });
      } catch (e) {
        if (!(e instanceof DiskError)) throw e;
        // Every job would fail the same way: stop the worker (the run stops) instead of retrying.
        opts.onFatal?.(e);
        throw new UnrecoverableError(e.message);
      }
      log(`done ${id} stop ${t.episode.stop_reason} tokens ${t.ids.length}`);
    },
    {
      connection: opts.connection,
      prefix: opts.settings.prefix,
      concurrency: opts.concurrency,
      lockDuration: opts.settings.lockDurationMs,
      stalledInterval: opts.settings.stalledIntervalMs,
      maxStalledCount: opts.settings.maxStalledCount,
      autorun: true,
    },
  );
  worker.on('failed', (job, err) => log(`failed ${job?.id ?? '?'}: ${err.message}`));
  // Connection errors are logged once per attempt by the connection itself.
  worker.on('error', (err) => {
    if (!isConnectionError(err)) log(`worker error: ${err.message}`);
  });
  await worker.waitUntilReady();
  let beat: Heartbeat | undefined;
  try {
    beat = await startHeartbeat(opts.connection, opts.runId, opts.workerId, 'rollout', opts.settings.heartbeatMs);
  } catch (e) {
    await worker.close();
    throw e;
  }
  return {
    worker,
    async close() {
      await worker.close();
      await beat?.stop();
      await store.close();
    },
  };
}
