/**
 * The `rollout` queue: one job per (group, sample index). The BullMQ job id is derived from
 * that pair, so enqueueing a job that is already queued, running or done adds nothing.
 */
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { keys, type RolloutJob } from './jobs';
import type { QueueSettings } from './settings';

export const ROLLOUT_JOB_NAME = 'rollout';

/** Jobs per addBulk transaction. */
const ENQUEUE_CHUNK = 256;

/**
 * BullMQ job id of a sample. BullMQ refuses custom ids with one ':' (its repeatable-job
 * format), so the separator is '#'.
 */
export function rolloutJobId(groupId: string, sampleIndex: number): string {
  if (groupId.includes(':')) throw new Error(`group id ${JSON.stringify(groupId)}: must not contain ':' (BullMQ job ids)`);
  if (!Number.isInteger(sampleIndex) || sampleIndex < 0)
    throw new Error(`group ${groupId}: sample index must be a non-negative integer, got ${sampleIndex}`);
  return `${groupId}#${sampleIndex}`;
}

export class RolloutQueue {
  readonly queue: Queue<RolloutJob>;

  constructor(
    connection: Redis,
    readonly runId: string,
    private readonly settings: QueueSettings,
  ) {
    this.queue = new Queue<RolloutJob>(keys.rolloutQueue(runId), { connection, prefix: settings.prefix });
    // The connection reports its own errors (connectRedis); unlistened, BullMQ prints the whole error object, AUTH arguments (the password) included.
    this.queue.on('error', () => undefined);
  }

  /**
   * Enqueues the jobs of one or more groups; ids already known to the queue are skipped by BullMQ.
   * Added in chunks: one addBulk is one Redis transaction, and workers see none of its jobs until
   * all are in, so the first episodes of a large step start after a chunk, not after the step.
   */
  async enqueueGroup(jobs: readonly RolloutJob[]): Promise<void> {
    for (const j of jobs) {
      if (j.run_id !== this.runId)
        throw new Error(`rollout job ${j.group_id}#${j.sample_index}: run id ${j.run_id}, queue belongs to ${this.runId}`);
    }
    for (let from = 0; from < jobs.length; from += ENQUEUE_CHUNK) await this.addChunk(jobs.slice(from, from + ENQUEUE_CHUNK));
  }

  private async addChunk(jobs: readonly RolloutJob[]): Promise<void> {
    await this.queue.addBulk(
      jobs.map((data) => ({
        name: ROLLOUT_JOB_NAME,
        data,
        opts: {
          jobId: rolloutJobId(data.group_id, data.sample_index),
          attempts: this.settings.attempts,
          backoff: { type: 'exponential', delay: this.settings.backoffMs },
          // Finished jobs stay until their group is dropped: their ids are what makes a re-enqueue a no-op.
          removeOnComplete: false,
          removeOnFail: false,
        },
      })),
    );
  }

  /** Removes the finished jobs of groups whose step is over. */
  async dropGroups(groups: readonly { groupId: string; size: number }[]): Promise<void> {
    for (const g of groups) {
      for (let i = 0; i < g.size; i++) await this.queue.remove(rolloutJobId(g.groupId, i));
    }
  }

  /** Why a group's job failed for good, if it did (undefined while it is queued, running or done). */
  async failure(groupId: string, sampleIndex: number): Promise<string | undefined> {
    const job = await this.queue.getJob(rolloutJobId(groupId, sampleIndex));
    if (!job || !(await job.isFailed())) return undefined;
    return job.failedReason || 'failed';
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}
