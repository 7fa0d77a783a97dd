/**
 * The `train` queue: one job per global update. The job id is derived from (run, update), so
 * resubmitting an update that is queued, running or done adds nothing, and waiting on it
 * returns the result it already has; an update whose job failed for good runs again. With a
 * data directory, a job's samples go to a token-batch file there (step-file.ts) and the job
 * carries its reference only; rows staged before submit (a group as soon as it is graded) are
 * already in the file by then.
 */
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Job, Queue, QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import { keys, type TrainJob, type TrainResult, type TrainSample } from './jobs';
import type { QueueSettings } from './settings';
import { TokenBatchWriter, writeTokenBatch, type TokenRowSource } from './step-file';

/** Token-batch file of an update's train job in the run's data directory. */
export const stepFilePath = (dataDir: string, update: number) =>
  join(dataDir, 'steps', `update-${String(update).padStart(6, '0')}.safetensors`);

/**
 * Deletes the step files of updates below `below` (a checkpoint holds them: resuming never
 * trains them again), and unfinished ones a killed controller left; later ones stay for a
 * train job that may still be retried.
 */
export function pruneStepFiles(dataDir: string, below: number): void {
  const root = join(dataDir, 'steps');
  if (!existsSync(root)) return;
  for (const n of readdirSync(root)) {
    const m = /^\.?update-(\d+)\.safetensors(\.tmp-.*)?$/.exec(n);
    if (m && Number(m[1]) < below) rmSync(join(root, n), { force: true });
  }
}

export const TRAIN_JOB_NAME = 'train';

export function trainJobId(runId: string, update: number): string {
  if (!Number.isInteger(update) || update < 0) throw new Error(`train job: update must be a non-negative integer, got ${update}`);
  return `${runId}.update.${update}`;
}

export class TrainTimeoutError extends Error {
  override name = 'TrainTimeoutError';
}

const rowsOf = (s: readonly TrainSample[]): TokenRowSource => ({
  count: s.length,
  row: (i) => ({ ids: s[i].ids, mask: s[i].mask, logprobs: s[i].old_logprobs, advantage: s[i].advantage }),
});

export class TrainQueue {
  readonly queue: Queue<TrainJob, TrainResult>;
  /** The step file being written ahead of submit, and the rows in it (by identity). */
  private staged?: { update: number; writer: TokenBatchWriter; ids: TrainSample['ids'][]; broken: boolean };
  /** The queue's job events on a connection of their own, opened by the first waitResult. */
  private events?: { queueEvents: QueueEvents; connection: Redis };

  constructor(
    private readonly connection: Redis,
    readonly runId: string,
    private readonly settings: QueueSettings,
    /** The run's shared data directory for step files; absent: samples travel inline in the job. */
    private readonly dataDir?: string,
  ) {
    this.queue = new Queue<TrainJob, TrainResult>(keys.trainQueue(runId), { connection, prefix: settings.prefix });
    // The connection reports its own errors (connectRedis); unlistened, BullMQ prints the whole error object, AUTH arguments (the password) included.
    this.queue.on('error', () => undefined);
  }

  /**
   * Writes rows of an update's step file ahead of submit, one block per call; `maxBlocks` bounds
   * the calls (the header space is reserved for them). Submit uses the file when the job's
   * samples are exactly the staged rows in order, and writes the file whole otherwise.
   */
  stage(update: number, samples: readonly TrainSample[], maxBlocks: number): void {
    if (!this.dataDir || samples.length === 0) return;
    if (this.staged && this.staged.update !== update) this.dropStaged();
    try {
      this.staged ??= {
        update,
        writer: new TokenBatchWriter(stepFilePath(this.dataDir, update), { reserveBlocks: maxBlocks }),
        ids: [],
        broken: false,
      };
      const st = this.staged;
      if (st.broken) return;
      if (st.writer.full) throw new Error(`more than ${maxBlocks} blocks`);
      st.writer.append(rowsOf(samples), `train job update ${update}`);
      st.ids.push(...samples.map((x) => x.ids));
    } catch {
      // Submit writes the file whole instead, and reports there what is wrong with the rows or the directory.
      if (this.staged) this.staged.broken = true;
    }
  }

  /** Adds the update's job; one that failed for good before (an earlier controller's) is replaced, so it runs again. */
  async submit(job: TrainJob): Promise<void> {
    if (job.run_id !== this.runId) throw new Error(`train job update ${job.update}: run id ${job.run_id}, queue belongs to ${this.runId}`);
    const id = trainJobId(this.runId, job.update);
    const staged = this.staged?.update === job.update ? this.staged : undefined;
    this.staged = undefined;
    const old = await this.queue.getJob(id);
    // One that failed for good before (an earlier controller's) is replaced, so it runs again.
    if (old && (await old.isFailed())) await old.remove();
    else if (old) {
      // A job the queue already has keeps its own step file: writing another would change the bytes its reference names.
      staged?.writer.abort();
      return;
    }
    let data = job;
    if (this.dataDir && job.samples.length > 0) {
      const s = job.samples;
      const same = staged && !staged.broken && staged.ids.length === s.length && staged.ids.every((ids, i) => ids === s[i].ids);
      if (staged && !same) staged.writer.abort();
      const batch = same
        ? staged.writer.finish()
        : writeTokenBatch(stepFilePath(this.dataDir, job.update), rowsOf(s), { where: `train job update ${job.update}` });
      const temps = s.map((x) => x.temperature);
      const temperatures = new Set(temps).size === 1 ? [temps[0]] : temps;
      data = { ...job, samples: [], batch, ...(temps.every((t) => t !== undefined) && { temperatures: temperatures as number[] }) };
    }
    await this.queue.add(TRAIN_JOB_NAME, data, {
      jobId: id,
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
        throw new TrainTimeoutError(
          `train job ${id}: no result after ${timeoutMs} ms (state ${state}); is a train worker running on this queue?`,
        );
      }
      await this.finishedOrAfter(id, Math.min(this.settings.pollMs, Math.max(1, deadline - Date.now())));
    }
  }

  /**
   * Resolves when the job's completed or failed event arrives, or after `ms` at the latest: the
   * waiter reads the result as soon as the job ends instead of at its next poll (half a poll
   * interval per update on average), and still polls should an event be missed.
   */
  private async finishedOrAfter(id: string, ms: number): Promise<void> {
    if (!this.events) {
      const connection = this.connection.duplicate();
      const queueEvents = new QueueEvents(keys.trainQueue(this.runId), { connection, prefix: this.settings.prefix });
      // The connection reports its own errors, as the queue's does.
      queueEvents.on('error', () => undefined);
      this.events = { queueEvents, connection };
      await queueEvents.waitUntilReady();
    }
    const events = this.events.queueEvents;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        events.off('completed', ended);
        events.off('failed', ended);
        resolve();
      };
      const ended = (e: { jobId: string }) => {
        if (e.jobId === id) done();
      };
      const timer = setTimeout(done, ms);
      events.on('completed', ended);
      events.on('failed', ended);
    });
  }

  /** The job data of an update, while its job is in the queue. */
  async data(update: number): Promise<TrainJob | undefined> {
    return (await this.queue.getJob(trainJobId(this.runId, update)))?.data;
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

  private dropStaged(): void {
    this.staged?.writer.abort();
    this.staged = undefined;
  }

  async close(): Promise<void> {
    this.dropStaged();
    if (this.events) {
      await this.events.queueEvents.close();
      this.events.connection.disconnect();
    }
    await this.queue.close();
  }
}
