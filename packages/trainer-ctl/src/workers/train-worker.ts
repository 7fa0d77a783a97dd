/**
 * The train worker: a BullMQ Worker (concurrency 1) on the run's train queue that owns the
 * train engine. Each job is one update: engine step, ONNX/weights export of the new policy to
 * policies/v<update+1>, optional checkpoint, publish. Updates run strictly in order; a job
 * for an update already done (its result was lost with a dead worker) returns the stored
 * result instead of training twice. On start the engine resumes from the run directory's
 * latest checkpoint when there is one, and the policy it holds is published. An engine that
 * dies during a job (OOM kill, crash) is started again from the latest checkpoint, takes the
 * updates after it again from their jobs' data, and the job is retried, at most
 * workers.train.engine_restarts times per job. Closing stops a busy engine at once: the update
 * it was making is redone by whoever runs the job next. With several train nodes this worker is
 * node 0's: an engine that dies, or loses a node, fails the job for good (the other nodes'
 * workers restart their ranks; the run is resumed), see train-node.ts.
 */
import { readFileSync } from 'node:fs';
import { UnrecoverableError, Worker } from 'bullmq';
import { writeManifest } from '@thinkfl/rollout';
import type { Redis } from 'ioredis';
import type { RunConfig } from '../config/schema';
import { DiskError } from '../disk-errors';
import { TrainEngine, type EngineOptions } from '../engine/driver';
import type { OptimizerSettings } from '../algo/core/optimizer-settings';
import { isConnectionError } from '../queue/connection';
import { startHeartbeat } from '../queue/heartbeats';
import { keys, type TrainJob, type TrainResult } from '../queue/jobs';
import { PolicyRegistry } from '../queue/policy-registry';
import type { QueueSettings } from '../queue/settings';
import { pruneStepFiles, TrainQueue } from '../queue/train-queue';
import { TrainResultStore } from '../queue/train-results';
import { syncTree } from './checkpoint-integrity';
import {
  checkpointDir,
  dataDir,
  latestCheckpoint,
  removeUnfinishedWrites,
  listCheckpoints,
  policyDir,
  prunePolicies,
  writeAtomically,
  writeTrainerState,
  type Checkpoint,
} from './run-files';
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
  /** Runs around each engine step (an update, or one redone after an engine restart): colocated vLLM replicas sleep through it (colocation.ts). Default: the step alone. */
  aroundStep?: <T>(update: number, step: () => Promise<T>) => Promise<T>;
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

/** How this node starts its part of the engine: its ranks, and the world of nodes they join. */
export function engineLaunch(config: RunConfig): EngineOptions {
  const t = config.workers.train;
  return {
    python: t.python,
    ranks: t.ranks,
    // DeepSpeed joins the launcher's process group, one rank included (it would look for MPI without one).
    distributed: t.deepspeed_config !== undefined,
    ...(t.nodes > 1 && { nodes: { count: t.nodes, rank: t.node_rank, rendezvous: t.rendezvous!, timeoutS: t.rendezvous_timeout_s } }),
  };
}

/** The engine's optimizer settings: grpo.optimizer without `reset`, which is the train worker's to act on. */
export function engineOptimizer(config: RunConfig): OptimizerSettings {
  const { reset: _reset, ...optimizer } = config.grpo.optimizer;
  return optimizer;
}

export async function startTrainWorker(opts: TrainWorkerOptions): Promise<TrainWorker> {
  const { config, runDir } = opts;
  const log = opts.log ?? (() => undefined);
  const registry = new PolicyRegistry(opts.connection, opts.runId);
  const results = new TrainResultStore(opts.connection, opts.runId);
  const backend = config.generation.backend;
  const exportFormat = backend.kind === 'vllm' ? backend.policy_format : backend.kind === 'onnx' ? 'onnx' : 'weights';
  const folder = backend.kind === 'vllm' ? 'adapters' : 'policies';
  const first = config.checkpoints.resume === 'never' ? undefined : latestCheckpoint(runDir, log);
  if (config.checkpoints.resume === 'require' && !first) throw new Error(`checkpoints.resume is require, but ${runDir} has no checkpoint`);

  let engine: TrainEngine;
  let updates = 0;
  /** The checkpoint the live engine was loaded from (undefined: the base model). */
  let origin: string | undefined;
  /** Tag of the KL reference the engine holds (restored from the checkpoint), or null. */
  let reference: string | null = null;
  /** Tag of the reset the engine's optimizer dates from (restored from the checkpoint), or null. */
  let optimizerTag: string | null = null;
  /** Starts an engine on `ckpt` (or the base model); the updates done are the checkpoint's. */
  const openEngine = async (ckpt: Checkpoint | undefined): Promise<void> => {
    const deepspeed = config.workers.train.deepspeed_config;
    engine = new TrainEngine({
      ...engineLaunch(config),
      onStderr: (t) => log(t.trimEnd()),
      ...opts.engine,
    });
    try {
      const loaded = await engine.request('load', {
        model_dir: ckpt?.dir ?? config.model.dir,
        device: config.workers.train.device,
        dtype: config.model.dtype,
        autocast: config.workers.train.autocast,
        autocast_cache: config.workers.train.autocast_cache,
        threads: config.workers.train.threads,
        lora: config.model.lora ?? null,
        gradient_checkpointing: config.workers.train.gradient_checkpointing,
        resume: ckpt !== undefined,
        seed: config.run.seed,
        optimizer: engineOptimizer(config),
        deepspeed: deepspeed ? (JSON.parse(readFileSync(deepspeed, 'utf8')) as Record<string, unknown>) : null,
      });
      updates = ckpt?.updates ?? 0;
      origin = ckpt?.dir;
      reference = loaded.reference;
      optimizerTag = loaded.optimizer;
      log(
        `engine loaded ${ckpt ? `checkpoint ${ckpt.dir} (${updates} updates)` : config.model.dir}: ${loaded.parameters} parameters on ` +
          `${loaded.device}${loaded.lora ? ` (LoRA: ${loaded.trainable_parameters} trainable)` : ''}, ${loaded.ranks} rank${loaded.ranks > 1 ? 's' : ''}, ` +
          `${loaded.threads} threads, compute ${loaded.precision}${reference ? `, KL reference ${reference}` : ''}${optimizerTag ? `, optimizer since reset ${optimizerTag}` : ''}`,
      );
    } catch (e) {
      await engine.dispose();
      throw e;
    }
  };
  const exportPolicy = async (version: number) => {
    const dir = policyDir(runDir, version, folder);
    await writeAtomically(dir, async (tmp) => {
      await engine.request('export', { dir: tmp, format: exportFormat });
      // Servers load the directory by path: the manifest lets the loading side check it is whole.
      if (folder === 'adapters') await writeManifest(tmp, version);
    });
    return dir;
  };
  const publish = async (version: number, dir: string) => {
    await registry.publish({ version, dir });
    prunePolicies(runDir, version - (config.workers.max_staleness + 2), folder);
    log(`published policy v${version} (${dir})`);
  };

  for (const d of removeUnfinishedWrites(runDir, folder)) log(`removed ${d}: a write that never finished`);
  await openEngine(first);
  try {
    await forgetFuture(opts.connection, opts.runId, opts.settings, updates, results);
    await publish(updates, await exportPolicy(updates));
  } catch (e) {
    await engine!.dispose();
    throw e;
  }

  /** Takes the KL reference (grpo.reference) from the current policy before the first update that needs it. */
  const ensureReference = async (job: TrainJob) => {
    if (config.grpo.loss.kl_coef === 0) return;
    const want = config.grpo.reference === 'grpo_start' ? 'grpo_start' : `stage_start:${job.stage}`;
    if (reference === want) return;
    reference = (await engine.request('set_reference', { tag: want })).reference;
    log(`KL reference: the policy before update ${job.update} (${want})`);
  };

  /** A new optimizer (grpo.optimizer.reset) before the first GRPO update of the run or of each stage. */
  const ensureFreshOptimizer = async (job: TrainJob) => {
    const policy = config.grpo.optimizer.reset;
    if (policy === 'never') return;
    const want = policy === 'grpo' ? 'grpo' : `stage:${job.stage}`;
    if (optimizerTag === want) return;
    optimizerTag = (await engine.request('reset_optimizer', { tag: want })).optimizer;
    log(`optimizer reset before update ${job.update} (grpo.optimizer.reset ${policy}): AdamW starts with no state`);
  };

  /** The engine's step for a job: its SFT steps in order, or one GRPO step. */
  const stepAlone = async (job: TrainJob): Promise<StepResult> => {
    let s: EngineStep;
    try {
      s = engineStep(job, config);
    } catch (e) {
      throw new UnrecoverableError((e as Error).message);
    }
    if (s.op === 'grpo_step') {
      await ensureReference(job);
      await ensureFreshOptimizer(job);
      return engine.request('grpo_step', s.args);
    }
    const parts: StepResult[] = [];
    for (const args of s.args) parts.push(await engine.request('sft_step', args));
    return mergeSteps(parts);
  };
  const step = (job: TrainJob): Promise<StepResult> =>
    opts.aroundStep ? opts.aroundStep(job.update, () => stepAlone(job)) : stepAlone(job);

  const queue = new TrainQueue(opts.connection, opts.runId, opts.settings);
  /**
   * A new engine for the job of update `target`, from the latest checkpoint at or before it;
   * the updates between take their steps again from their jobs' data (same data, same
   * order: the same weights), without exporting what is already published.
   */
  const restartEngine = async (target: number): Promise<void> => {
    await engine.dispose();
    const ckpt = listCheckpoints(runDir)
      .filter((c) => c.updates <= target)
      .at(-1);
    await openEngine(ckpt);
    while (updates < target) {
      const job = await queue.data(updates);
      if (!job)
        throw new UnrecoverableError(
          `engine restart: the train job of update ${updates} is gone, so update ${target} cannot be rebuilt; resume the run`,
        );
      if (job.kind !== 'checkpoint') await step(job);
      updates++;
    }
  };

  /** The last update when the engine stepped but export/checkpoint/publish failed: a retry finishes it. */
  let unfinished: { update: number; metrics: Record<string, number> } | undefined;
  /** Export, checkpoint, store and publish the update the engine just made. */
  const finish = async (job: TrainJob, measured: Record<string, number>): Promise<TrainResult> => {
    const version = job.update + 1;
    const exportStarted = Date.now();
    const dir = job.export === false ? undefined : await exportPolicy(version);
    const metrics = dir ? { ...measured, export_ms: Date.now() - exportStarted } : measured;
    let checkpoint: string | undefined;
    if (job.checkpoint) {
      checkpoint = checkpointDir(runDir, version);
      await writeAtomically(checkpoint, async (tmp) => {
        await engine.request('save', { dir: tmp });
        writeTrainerState(tmp, version);
        syncTree(tmp);
      });
      pruneStepFiles(dataDir(runDir), version);
    }
    const result: TrainResult = {
      update: job.update,
      version,
      ...(dir && { policyDir: dir }),
      metrics,
      ...(checkpoint && { checkpointDir: checkpoint }),
      ...(origin && { engineCheckpoint: origin }),
    };
    await results.put(result);
    if (dir) await publish(version, dir);
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
      throw new UnrecoverableError(
        `train job update ${job.update}: the engine has done ${updates} updates; submit update ${updates} first`,
      );
    }
    const started = Date.now();
    if (job.kind === 'checkpoint') {
      updates = job.update + 1;
      unfinished = { update: job.update, metrics: {} };
      log(`update ${job.update} (checkpoint): the weights as they are`);
      return finish(job, unfinished.metrics);
    }
    const out = await step(job);
    updates = job.update + 1;
    unfinished = { update: job.update, metrics: { ...stepMetrics(out), train_ms: Date.now() - started } };
    log(
      `update ${job.update} (${job.kind}, ${job.batch?.rows ?? job.samples.length} samples${job.batch ? ` from ${job.batch.path}` : ''}): loss ${out.loss}`,
    );
    return finish(job, unfinished.metrics);
  };

  let closing = false;
  let busy = false;
  const nodes = config.workers.train.nodes;
  const guarded = async (job: TrainJob): Promise<TrainResult> => {
    const limit = config.workers.train.engine_restarts;
    busy = true;
    try {
      for (let restarts = 0; ; restarts++) {
        try {
          return await handle(job);
        } catch (e) {
          // A full or read-only disk is the same on a retry: the run stops, to be resumed once it is fixed.
          if (e instanceof DiskError) throw new UnrecoverableError(e.message);
          if (!engine.dead || closing) throw e;
          const why = (e as Error).message.split('\n')[0];
          if (nodes > 1) {
            // The other nodes' ranks went down with it (or were the cause): only their workers can bring them back.
            const death = new Error(
              `train engine of ${nodes} nodes failed during update ${job.update}: ${why}; a multi-node engine is started ` +
                "again by every node's train worker: check that each node's `trainer-ctl worker train --node-rank K` runs, " +
                'then continue the run with --resume',
            );
            opts.onEngineDeath?.(death);
            throw new UnrecoverableError(death.message);
          }
          if (restarts >= limit) {
            // The job fails for good; the worker's owner decides what happens to the worker.
            const death = new Error(
              `train engine died${limit > 0 ? ` ${limit + 1} times` : ''} (workers.train.engine_restarts ${limit}): ${why}`,
            );
            opts.onEngineDeath?.(death);
            throw new UnrecoverableError(death.message);
          }
          log(`engine died during update ${job.update} (${why}); restarting it from the latest checkpoint (${restarts + 1} of ${limit})`);
          await restartEngine(job.update);
        }
      }
    } finally {
      busy = false;
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
  // Connection errors are logged once per attempt by the connection itself.
  worker.on('error', (err) => {
    if (!isConnectionError(err)) log(`worker error: ${err.message}`);
  });
  await worker.waitUntilReady();
  const beat = await startHeartbeat(opts.connection, opts.runId, opts.workerId, 'train', opts.settings.heartbeatMs);
  return {
    worker,
    get updates() {
      return updates;
    },
    get enginePid() {
      return engine.pid;
    },
    async close() {
      closing = true;
      if (busy) await engine.dispose();
      await worker.close();
      await beat.stop();
      await queue.close();
      await engine.shutdown();
    },
  };
}
