/**
 * The `train` queue: one job per global update. The job id is derived from (run, update), so
 * resubmitting an update that is queued, running or done adds nothing, and waiting on it
 * returns the result it already has.
 */
import { Job, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { keys, type TrainJob, type TrainResult } from './jobs';
import type { QueueSettings } from './settings';

export const TRAIN_JOB_NAME = 'train';

export function trainJobId(runId: string, update: number): string {
  if (!Number.isInteger(update) || update < 0) throw new Error(`train job: update must be a non-negative integer, got ${update}`);
  return `${runId}.update.${update}`;
}

export class TrainTimeoutError extends Error {
  override name = 'TrainTimeoutError';
}

export class TrainQueue {
  readonly queue: Queue<TrainJob, TrainResult>;

  constructor(
    connection: Redis,
    readonly runId: string,
    private readonly settings: QueueSettings,
  ) {
    this.queue = new Queue<TrainJob, TrainResult>(keys.trainQueue(runId), { connection, prefix: settings.prefix });
    // The connection reports its own errors (connectRedis); unlistened, BullMQ prints the whole error object, AUTH arguments (the password) included.
    this.queue.on('error', () => undefined);
  }

  async submit(job: TrainJob): Promise<void> {
    if (job.runId !== this.runId) throw new Error(`train job update ${job.update}: run id ${job.runId}, queue belongs to ${this.runId}`);
    await this.queue.add(TRAIN_JOB_NAME, job, {
      jobId: trainJobId(this.runId, job.update),
      attempts: this.settings.attempts,
      backoff: { type: 'exponential', delay: this.settings.backoffMs },
      removeOnComplete: false,
      removeOnFail: false,
    });
  }

  /**
   * The result of an update once its job completed. Rejects when the job failed for good
   * (with the worker's reason), is unknown, or has not finished within timeoutMs.
   */
  async waitResult(update: number, timeoutMs: number): Promise<TrainResult> {
    const id = trainJobId(this.runId, update);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      // State first, then the job: a job read before it completed would carry no return value yet.
      const state = await this.queue.getJobState(id);
      if (state === 'unknown') throw new Error(`train job ${id} is not in the queue (submit it first)`);
      if (state === 'completed' || state === 'failed') {
        const job = await Job.fromId<TrainJob, TrainResult>(this.queue, id);
        if (!job) throw new Error(`train job ${id} was removed while waiting for its result`);
        if (state === 'completed') return job.returnvalue;
        throw new Error(`train job ${id} failed after ${job.attemptsMade} attempt(s): ${job.failedReason}`);
      }
      if (Date.now() >= deadline) {
        throw new TrainTimeoutError(`train job ${id}: no result after ${timeoutMs} ms (state ${state}); is a train worker running on this queue?`);
      }
      await new Promise((r) => setTimeout(r, Math.min(this.settings.pollMs, Math.max(1, deadline - Date.now()))));
    }
  }

  /** Updates that have a job in the queue, in any state. */
  async updates(): Promise<number[]> {
    const prefix = `${this.runId}.update.`;
    const jobs = await this.queue.getJobs(['waiting', 'active', 'delayed', 'completed', 'failed', 'prioritized', 'waiting-children']);
    return jobs.flatMap((j) => (j?.id?.startsWith(prefix) ? [Number(j.id.slice(prefix.length))] : []));
  }

  /**
   * Forgets an update's finished (completed or failed) job, so that submitting the same update
   * runs it again; a job still queued or running is kept.
   */
  async forget(update: number): Promise<void> {
    const job = await this.queue.getJob(trainJobId(this.runId, update));
    if (job && ((await job.isCompleted()) || (await job.isFailed()))) await job.remove();
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}
