/**
 * The train worker: a BullMQ Worker (concurrency 1) on the run's train queue that owns the
 * train engine. Each job is one update (update-runner.ts: engine step, export of the new policy
 * to policies/v<update+1>, optional checkpoint, publish) on the engine of engine-supervisor.ts.
 * On start the engine resumes from the run directory's latest checkpoint when there is one, the
 * jobs and results of updates past it are forgotten, and the policy it holds is published.
 * Closing stops a busy engine at once: the update it was making is redone by whoever runs the
 * job next. With several train nodes this worker is node 0's, see train-node.ts.
 */
import { UnrecoverableError, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { RunConfig } from '../config/schema';
import { DiskError } from '../disk-errors';
import type { EngineOptions } from '../engine/driver';
import { isConnectionError } from '../queue/connection';
import { startHeartbeat } from '../queue/heartbeats';
import { keys, type TrainJob, type TrainResult } from '../queue/jobs';
import { PolicyRegistry } from '../queue/policy-registry';
import type { QueueSettings } from '../queue/settings';
import { TrainQueue } from '../queue/train-queue';
import { TrainResultStore } from '../queue/train-results';
import { EngineSupervisor } from './engine-supervisor';
import { latestCheckpoint, removeUnfinishedWrites } from './run-files';
import { PermanentJobError, policyFolder, UpdateRunner, type UpdateRunnerOptions } from './update-runner';

export interface TrainWorkerOptions {
  connection: Redis;
  runId: string;
  workerId: string;
  settings: QueueSettings;
  config: RunConfig;
  runDir: string;
  engine?: EngineOptions;
  log?: (line: string) => void;
  /** Called once the engine process has died: this worker can take no more jobs. */
  onEngineDeath?: (err: Error) => void;
  /** Runs around each engine step (an update, or one redone after an engine restart): colocated vLLM replicas sleep through it (colocation.ts). Default: the step alone. */
  aroundStep?: UpdateRunnerOptions['aroundStep'];
}

export interface TrainWorker {
  readonly worker: Worker<TrainJob, TrainResult>;
  /** Updates done so far (= the published policy version). */
  readonly updates: number;
  /** pid of the current engine process (a restarted engine has a new one). */
  readonly enginePid: number | undefined;
  close(): Promise<void>;
}

/** Drops jobs and results of updates past the resumed checkpoint: they belong to a lost future. */
async function forgetFuture(queue: TrainQueue, results: TrainResultStore, from: number): Promise<void> {
  const last = Math.max(from, ...(await results.updates()), ...(await queue.updates()));
  for (let u = from; u <= last; u++) {
    await queue.forget(u);
    await results.forget(u);
  }
}

/** The engine on the run directory's latest checkpoint (checkpoints.resume), with the runner of its updates and v<updates> published. */
async function startRunner(opts: TrainWorkerOptions, queue: TrainQueue): Promise<{ supervisor: EngineSupervisor; runner: UpdateRunner }> {
  const { config, runDir } = opts;
  const log = opts.log ?? (() => undefined);
  const first = config.checkpoints.resume === 'never' ? undefined : latestCheckpoint(runDir, log);
  if (config.checkpoints.resume === 'require' && !first) throw new Error(`checkpoints.resume is require, but ${runDir} has no checkpoint`);
  for (const d of removeUnfinishedWrites(runDir, policyFolder(config))) log(`removed ${d}: a write that never finished`);
  const supervisor = new EngineSupervisor({ config, runDir, engine: opts.engine, log });
  const updates = await supervisor.open(first);
  const results = new TrainResultStore(opts.connection, opts.runId);
  const runner = new UpdateRunner({
    config,
    runDir,
    supervisor,
    updates,
    results,
    registry: new PolicyRegistry(opts.connection, opts.runId),
    jobOf: (u) => queue.data(u),
    aroundStep: opts.aroundStep,
    onEngineDeath: opts.onEngineDeath,
    log,
  });
  try {
    await forgetFuture(queue, results, updates);
    await runner.publishCurrent();
  } catch (e) {
    await supervisor.dispose();
    throw e;
  }
  return { supervisor, runner };
}

export async function startTrainWorker(opts: TrainWorkerOptions): Promise<TrainWorker> {
  const log = opts.log ?? (() => undefined);
  const queue = new TrainQueue(opts.connection, opts.runId, opts.settings);
  const { supervisor, runner } = await startRunner(opts, queue).catch(async (e) => {
    await queue.close();
    throw e;
  });
  const runJob = async (job: TrainJob): Promise<TrainResult> => {
    try {
      return await runner.run(job);
    } catch (e) {
      // Retries would fail the same way (a full or read-only disk included: the run stops, to be resumed once it is fixed).
      if (e instanceof PermanentJobError || e instanceof DiskError) throw new UnrecoverableError(e.message);
      throw e;
    }
  };
  const worker = new Worker<TrainJob, TrainResult>(keys.trainQueue(opts.runId), async (j) => runJob(j.data), {
    connection: opts.connection,
    prefix: opts.settings.prefix,
    concurrency: 1,
    lockDuration: opts.settings.lockDurationMs,
    stalledInterval: opts.settings.stalledIntervalMs,
    maxStalledCount: opts.settings.maxStalledCount,
  });
  worker.on('failed', (j, err) => log(`failed ${j?.id ?? '?'}: ${err.message}`));
  // Connection errors are logged once per attempt by the connection itself.
  worker.on('error', (err) => {
    if (!isConnectionError(err)) log(`worker error: ${err.message}`);
  });
  await worker.waitUntilReady();
  const beat = await startHeartbeat(opts.connection, opts.runId, opts.workerId, 'train', opts.settings.heartbeatMs);
  return {
    worker,
    get updates() {
      return runner.updates;
    },
    get enginePid() {
      return supervisor.pid;
    },
    async close() {
      await runner.interrupt();
      await worker.close();
      await beat.stop();
      await queue.close();
      await supervisor.shutdown();
    },
  };
}
