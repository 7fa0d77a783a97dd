/**
 * The train worker: a BullMQ Worker (concurrency 1) on the run's train queue that owns the
 * train engine. Each job is one update: engine step, ONNX/weights export of the new policy to
 * policies/v<update+1>, optional checkpoint, publish. Updates run strictly in order; a job
 * for an update already done (its result was lost with a dead worker) returns the stored
 * result instead of training twice. On start the engine resumes from the run directory's
 * latest checkpoint when there is one, and the policy it holds is published.
 */
import { readFileSync } from 'node:fs';
import { UnrecoverableError, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { RunConfig } from '../config/schema';
import { TrainEngine, type EngineOptions } from '../engine/driver';
import { startHeartbeat } from '../queue/heartbeats';
import { keys, type TrainJob, type TrainResult } from '../queue/jobs';
import { PolicyRegistry } from '../queue/policy-registry';
import type { QueueSettings } from '../queue/settings';
import { TrainQueue } from '../queue/train-queue';
import { TrainResultStore } from '../queue/train-results';
import { checkpointDir, latestCheckpoint, policyDir, prunePolicies, writeAtomically, writeTrainerState } from './run-files';
import type { StepResult } from '../engine/protocol';
import { engineStep, mergeSteps, stepMetrics, type EngineStep } from './train-step';

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
}

export interface TrainWorker {
  readonly worker: Worker<TrainJob, TrainResult>;
  /** Updates done so far (= the published policy version). */
  readonly updates: number;
  readonly enginePid: number | undefined;
  close(): Promise<void>;
}

/** Drops jobs and results of updates past the resumed checkpoint: they belong to a lost future. */
async function forgetFuture(conn: Redis, runId: string, settings: QueueSettings, from: number, results: TrainResultStore): Promise<void> {
  const queue = new TrainQueue(conn, runId, settings);
  try {
    const last = Math.max(from, ...(await results.updates()), ...(await queue.updates()));
    for (let u = from; u <= last; u++) {
      await queue.forget(u);
      await results.forget(u);
    }
  } finally {
    await queue.close();
  }
}

export async function startTrainWorker(opts: TrainWorkerOptions): Promise<TrainWorker> {
  const { config, runDir } = opts;
  const log = opts.log ?? (() => undefined);
  const registry = new PolicyRegistry(opts.connection, opts.runId);
  const results = new TrainResultStore(opts.connection, opts.runId);
  const exportFormat = config.generation.backend.kind === 'onnx' ? 'onnx' : 'weights';
  const ckpt = config.checkpoints.resume === 'never' ? undefined : latestCheckpoint(runDir);
  if (config.checkpoints.resume === 'require' && !ckpt) throw new Error(`checkpoints.resume is require, but ${runDir} has no checkpoint`);

  const engine = new TrainEngine({
    python: config.workers.train.python,
    ranks: config.workers.train.ranks,
    onStderr: (t) => log(t.trimEnd()),
    ...opts.engine,
  });
  let updates = ckpt?.updates ?? 0;
  const exportPolicy = async (version: number) => {
    const dir = policyDir(runDir, version);
    await writeAtomically(dir, async (tmp) => {
      await engine.request('export', { dir: tmp, format: exportFormat });
    });
    return dir;
  };
  const publish = async (version: number, dir: string) => {
    await registry.publish({ version, dir });
    prunePolicies(runDir, version - (config.workers.max_staleness + 2));
    log(`published policy v${version} (${dir})`);
  };

  try {
    const deepspeed = config.workers.train.deepspeed_config;
    const loaded = await engine.request('load', {
      model_dir: ckpt?.dir ?? config.model.dir,
      device: config.workers.train.device,
      dtype: config.model.dtype,
      autocast: config.workers.train.autocast,
      reference: config.grpo.loss.kl_coef > 0,
      lora: config.model.lora ?? null,
      resume: ckpt !== undefined,
      seed: config.run.seed,
      optimizer: config.grpo.optimizer,
      deepspeed: deepspeed ? (JSON.parse(readFileSync(deepspeed, 'utf8')) as Record<string, unknown>) : null,
    });
    log(`engine loaded ${ckpt ? `checkpoint ${ckpt.dir} (${updates} updates)` : config.model.dir}: ${loaded.parameters} parameters on ${loaded.device}`);
    await forgetFuture(opts.connection, opts.runId, opts.settings, updates, results);
    await publish(updates, await exportPolicy(updates));
  } catch (e) {
    await engine.dispose();
    throw e;
  }

  /** The last update when the engine stepped but export/checkpoint/publish failed: a retry finishes it. */
  let unfinished: { update: number; metrics: Record<string, number> } | undefined;
  /** Export, checkpoint, store and publish the update the engine just made. */
  const finish = async (job: TrainJob, metrics: Record<string, number>): Promise<TrainResult> => {
    const version = job.update + 1;
    const dir = await exportPolicy(version);
    let checkpoint: string | undefined;
    if (job.checkpoint) {
      checkpoint = checkpointDir(runDir, version);
      await writeAtomically(checkpoint, async (tmp) => {
        await engine.request('save', { dir: tmp });
        writeTrainerState(tmp, version);
      });
    }
    const result: TrainResult = { update: job.update, version, policyDir: dir, metrics, ...(checkpoint && { checkpointDir: checkpoint }) };
    await results.put(result);
    await publish(version, dir);
    unfinished = undefined;
    return result;
  };

  const handle = async (job: TrainJob): Promise<TrainResult> => {
    if (job.update < updates) {
      const stored = await results.get(job.update);
      if (stored) {
        log(`update ${job.update} was done before; returning its stored result`);
        return stored;
      }
      if (unfinished?.update === job.update) return finish(job, unfinished.metrics);
      throw new UnrecoverableError(`train job update ${job.update}: already done (${updates} updates) and its result is gone`);
    }
    if (job.update > updates) {
      throw new UnrecoverableError(`train job update ${job.update}: the engine has done ${updates} updates; submit update ${updates} first`);
    }
    let step: EngineStep;
    try {
      step = engineStep(job, config);
    } catch (e) {
      throw new UnrecoverableError((e as Error).message);
    }
    const started = Date.now();
    let out: StepResult;
    if (step.op === 'sft_step') {
      const parts: StepResult[] = [];
      for (const args of step.args) parts.push(await engine.request('sft_step', args));
      out = mergeSteps(parts);
    } else {
      out = await engine.request('grpo_step', step.args);
    }
    updates = job.update + 1;
    unfinished = { update: job.update, metrics: { ...stepMetrics(out), trainMs: Date.now() - started } };
    log(`update ${job.update} (${job.kind}, ${job.samples.length} samples): loss ${out.loss}`);
    return finish(job, unfinished.metrics);
  };

  const guarded = async (job: TrainJob): Promise<TrainResult> => {
    try {
      return await handle(job);
    } catch (e) {
      if (!engine.dead) throw e;
      // Retrying on a dead engine cannot help; the job fails now and the worker's owner restarts it.
      opts.onEngineDeath?.(e as Error);
      throw new UnrecoverableError(`train engine died: ${(e as Error).message}`);
    }
  };
  const worker = new Worker<TrainJob, TrainResult>(keys.trainQueue(opts.runId), async (j) => guarded(j.data), {
    connection: opts.connection,
    prefix: opts.settings.prefix,
    concurrency: 1,
    lockDuration: opts.settings.lockDurationMs,
    stalledInterval: opts.settings.stalledIntervalMs,
    maxStalledCount: opts.settings.maxStalledCount,
  });
  worker.on('failed', (j, err) => log(`failed ${j?.id ?? '?'}: ${err.message}`));
  worker.on('error', (err) => log(`worker error: ${err.message}`));
  await worker.waitUntilReady();
  const beat = await startHeartbeat(opts.connection, opts.runId, opts.workerId, 'train', opts.settings.heartbeatMs);
  return {
    worker,
    get updates() {
      return updates;
    },
    enginePid: engine.pid,
    async close() {
      await worker.close();
      await beat.stop();
      await engine.shutdown();
    },
  };
}
