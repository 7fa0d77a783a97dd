/**
 * The train worker's updates, one job at a time: the engine step (its SFT steps in order, or one
 * GRPO step), the export of the new policy to policies/v<update+1>, an optional checkpoint, the
 * stored result and the publish. Updates run strictly in order; a job for an update already
 * done returns the stored result instead of training twice. An engine that dies during a job is
 * started again from the latest checkpoint, takes the updates after it again from their jobs'
 * data, and the job runs again, at most workers.train.engine_restarts times per job; with
 * several train nodes it fails the job for good instead (train-node.ts).
 */
import { writeManifest } from '@thinkfl/rollout';
import type { RunConfig } from '../config/schema';
import { DiskError } from '../disk-errors';
import type { StepResult } from '../engine/protocol';
import type { TrainJob, TrainResult } from '../queue/jobs';
import type { PolicyRegistry } from '../queue/policy-registry';
import { pruneStepFiles } from '../queue/train-queue';
import type { TrainResultStore } from '../queue/train-results';
import { syncTree } from './checkpoint-integrity';
import type { EngineSupervisor } from './engine-supervisor';
import { checkpointDir, dataDir, policyDir, prunePolicies, writeAtomically, writeTrainerState } from './run-files';
import { engineStep, mergeSteps, stepMetrics, type EngineStep } from './train-step';

/** A job that fails for good: running it again would fail the same way. */
export class PermanentJobError extends Error {
  override name = 'PermanentJobError';
}

/** The run directory's folder of published policies: adapters/ for vLLM's servers, policies/ otherwise. */
export function policyFolder(config: RunConfig): 'adapters' | 'policies' {
  return config.generation.backend.kind === 'vllm' ? 'adapters' : 'policies';
}

export interface UpdateRunnerOptions {
  config: RunConfig;
  runDir: string;
  supervisor: EngineSupervisor;
  /** The updates the supervisor's engine holds now. */
  updates: number;
  results: TrainResultStore;
  registry: PolicyRegistry;
  /** The job of an update, for the updates an engine restart takes again (the train queue keeps them). */
  jobOf: (update: number) => Promise<TrainJob | undefined>;
  /** Runs around each engine step (colocation.ts). Default: the step alone. */
  aroundStep?: <T>(update: number, step: () => Promise<T>) => Promise<T>;
  /** Called once the engine died for good: no more jobs can run. */
  onEngineDeath?: (err: Error) => void;
  log?: (line: string) => void;
}

export class UpdateRunner {
  private done: number;
  /** The last update when the engine stepped but export/checkpoint/publish failed: a retry finishes it. */
  private unfinished: { update: number; metrics: Record<string, number> } | undefined;
  private closing = false;
  private busy = false;
  private readonly folder: 'adapters' | 'policies';
  private readonly exportFormat: 'onnx' | 'weights';
  private readonly log: (line: string) => void;

  constructor(private readonly opts: UpdateRunnerOptions) {
    this.done = opts.updates;
    this.log = opts.log ?? (() => undefined);
    const backend = opts.config.generation.backend;
    this.exportFormat = backend.kind === 'vllm' ? backend.policy_format : backend.kind === 'onnx' ? 'onnx' : 'weights';
    this.folder = policyFolder(opts.config);
  }

  /** Updates done so far (= the published policy version). */
  get updates(): number {
    return this.done;
  }

  /** Exports and publishes the policy the engine holds now, as version `updates`. */
  async publishCurrent(): Promise<void> {
    await this.publish(this.done, await this.exportPolicy(this.done));
  }

  /** Runs a job's update, starting a dead engine again as workers.train.engine_restarts allows. */
  async run(job: TrainJob): Promise<TrainResult> {
    const limit = this.opts.config.workers.train.engine_restarts;
    this.busy = true;
    try {
      for (let restarts = 0; ; restarts++) {
        try {
          return await this.handle(job);
        } catch (e) {
          // A full or read-only disk is the same on a retry: the run stops, to be resumed once it is fixed.
          if (e instanceof DiskError || !this.opts.supervisor.dead || this.closing) throw e;
          const why = (e as Error).message.split('\n')[0];
          const death = this.deathFor(job, why, restarts, limit);
          if (death) {
            this.opts.onEngineDeath?.(death);
            throw new PermanentJobError(death.message);
          }
          this.log(
            `engine died during update ${job.update} (${why}); restarting it from the latest checkpoint (${restarts + 1} of ${limit})`,
          );
          await this.rebuild(job.update);
        }
      }
    } finally {
      this.busy = false;
    }
  }

  /** Stops a busy engine at once: the update it was making is redone by whoever runs the job next. */
  async interrupt(): Promise<void> {
    this.closing = true;
    if (this.busy) await this.opts.supervisor.dispose();
  }

  /** The error that ends the run for an engine dead during `job`, or undefined when it may start again. */
  private deathFor(job: TrainJob, why: string, restarts: number, limit: number): Error | undefined {
    const nodes = this.opts.config.workers.train.nodes;
    if (nodes > 1) {
      // The other nodes' ranks went down with it (or were the cause): only their workers can bring them back.
      return new Error(
        `train engine of ${nodes} nodes failed during update ${job.update}: ${why}; a multi-node engine is started ` +
          "again by every node's train worker: check that each node's `trainer-ctl worker train --node-rank K` runs, " +
          'then continue the run with --resume',
      );
    }
    // The job fails for good; the worker's owner decides what happens to the worker.
    if (restarts >= limit)
      return new Error(`train engine died${limit > 0 ? ` ${limit + 1} times` : ''} (workers.train.engine_restarts ${limit}): ${why}`);
    return undefined;
  }

  /**
   * A new engine for the job of update `target`, from the latest checkpoint at or before it;
   * the updates between take their steps again from their jobs' data (same data, same
   * order: the same weights), without exporting what is already published.
   */
  private async rebuild(target: number): Promise<void> {
    this.done = await this.opts.supervisor.restart(target);
    while (this.done < target) {
      const job = await this.opts.jobOf(this.done);
      if (!job)
        throw new PermanentJobError(
          `engine restart: the train job of update ${this.done} is gone, so update ${target} cannot be rebuilt; resume the run`,
        );
      if (job.kind !== 'checkpoint') await this.step(job);
      this.done++;
    }
  }

  private async handle(job: TrainJob): Promise<TrainResult> {
    if (job.update < this.done) return this.answerDone(job);
    if (job.update > this.done) {
      throw new PermanentJobError(
        `train job update ${job.update}: the engine has done ${this.done} updates; submit update ${this.done} first`,
      );
    }
    const started = Date.now();
    if (job.kind === 'checkpoint') {
      this.done = job.update + 1;
      this.unfinished = { update: job.update, metrics: {} };
      this.log(`update ${job.update} (checkpoint): the weights as they are`);
      return this.finish(job, this.unfinished.metrics);
    }
    const out = await this.step(job);
    this.done = job.update + 1;
    this.unfinished = { update: job.update, metrics: { ...stepMetrics(out), train_ms: Date.now() - started } };
    this.log(
      `update ${job.update} (${job.kind}, ${job.batch?.rows ?? job.samples.length} samples${job.batch ? ` from ${job.batch.path}` : ''}): loss ${out.loss}`,
    );
    return this.finish(job, this.unfinished.metrics);
  }

  /** A job for an update already made: its stored result, or the rest of its work when only that failed. */
  private async answerDone(job: TrainJob): Promise<TrainResult> {
    const stored = await this.opts.results.get(job.update);
    if (stored) {
      this.log(`update ${job.update} was done before; returning its stored result`);
      return stored;
    }
    if (this.unfinished?.update === job.update) return this.finish(job, this.unfinished.metrics);
    throw new PermanentJobError(`train job update ${job.update}: already done (${this.done} updates) and its result is gone`);
  }

  /** Export, checkpoint, store and publish the update the engine just made. */
  private async finish(job: TrainJob, measured: Record<string, number>): Promise<TrainResult> {
    const version = job.update + 1;
    const exportStarted = Date.now();
    const dir = job.export === false ? undefined : await this.exportPolicy(version);
    const metrics = dir ? { ...measured, export_ms: Date.now() - exportStarted } : measured;
    const checkpoint = job.checkpoint ? await this.checkpoint(version) : undefined;
    const origin = this.opts.supervisor.origin;
    const result: TrainResult = {
      update: job.update,
      version,
      ...(dir && { policy_dir: dir }),
      metrics,
      ...(checkpoint && { checkpoint_dir: checkpoint }),
      ...(origin && { engine_checkpoint: origin }),
    };
    await this.opts.results.put(result);
    if (dir) await this.publish(version, dir);
    this.unfinished = undefined;
    return result;
  }

  /** The engine's step for a job: its SFT steps in order, or one GRPO step. */
  private step(job: TrainJob): Promise<StepResult> {
    const alone = () => this.stepAlone(job);
    return this.opts.aroundStep ? this.opts.aroundStep(job.update, alone) : alone();
  }

  private async stepAlone(job: TrainJob): Promise<StepResult> {
    let s: EngineStep;
    try {
      s = engineStep(job, this.opts.config);
    } catch (e) {
      throw new PermanentJobError((e as Error).message);
    }
    const { supervisor } = this.opts;
    if (s.op === 'grpo_step') {
      await supervisor.ensureReference(job.stage, job.update);
      await supervisor.ensureFreshOptimizer(job.stage, job.update);
      return supervisor.engine.request('grpo_step', s.args);
    }
    const parts: StepResult[] = [];
    for (const args of s.args) parts.push(await supervisor.engine.request('sft_step', args));
    return mergeSteps(parts);
  }

  private async exportPolicy(version: number): Promise<string> {
    const dir = policyDir(this.opts.runDir, version, this.folder);
    await writeAtomically(dir, async (tmp) => {
      const graphCache = this.exportFormat === 'onnx' ? this.opts.config.workers.train.onnx_graph_cache : null;
      const out = await this.opts.supervisor.engine.request('export', { dir: tmp, format: this.exportFormat, graph_cache: graphCache });
      // A trace of a large model takes minutes: say once per engine whether it was paid or read from the cache.
      if (out.graphs === 'traced') this.log(`ONNX graphs traced for policy v${version}${graphCache ? ` (kept in ${graphCache})` : ''}`);
      if (out.graphs === 'cached') this.log(`ONNX graphs for policy v${version} read from ${graphCache}`);
      // Servers load the directory by path: the manifest lets the loading side check it is whole.
      if (this.folder === 'adapters') await writeManifest(tmp, version);
    });
    return dir;
  }

  /** The engine's full state (weights, optimizer, KL reference) as the checkpoint after `version` updates. */
  private async checkpoint(version: number): Promise<string> {
    const dir = checkpointDir(this.opts.runDir, version);
    await writeAtomically(dir, async (tmp) => {
      await this.opts.supervisor.engine.request('save', { dir: tmp });
      writeTrainerState(tmp, version);
      syncTree(tmp);
    });
    pruneStepFiles(dataDir(this.opts.runDir), version);
    return dir;
  }

  private async publish(version: number, dir: string): Promise<void> {
    await this.opts.registry.publish({ version, dir });
    prunePolicies(this.opts.runDir, version - (this.opts.config.workers.max_staleness + 2), this.folder);
    this.log(`published policy v${version} (${dir})`);
  }
}
