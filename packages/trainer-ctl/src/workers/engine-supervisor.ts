/**
 * The train worker's engine and what it holds besides weights: the supervisor opens an engine
 * on a checkpoint (or the base model), starts it again from the latest checkpoint after it
 * died, and keeps the KL reference and the optimizer's reset tag as the run config asks,
 * knowing which of them the loaded checkpoint already restored.
 */
import { readFileSync } from 'node:fs';
import type { RunConfig } from '../config/schema';
import { TrainEngine, type EngineOptions } from '../engine/driver';
import type { OptimizerSettings } from '../algo/core/optimizer-settings';
import type { LoadArgs, LoadResult } from '../engine/protocol';
import { REDIS_PASSWORD_ENV, REDIS_URL_ENV } from '../queue/redis-url';
import { listCheckpoints, type Checkpoint } from './run-files';

/** How this node starts its part of the engine: its ranks, and the world of nodes they join. */
export function engineLaunch(config: RunConfig): EngineOptions {
  const t = config.workers.train;
  return {
    python: t.python,
    ranks: t.ranks,
    // DeepSpeed joins the launcher's process group, one rank included (it would look for MPI without one).
    distributed: t.deepspeed_config !== undefined,
    // The engine never talks to Redis: its URL and password stay out of its environment, and so out
    // of its template's key (engine/templates.ts), which a resumed run's new Redis port would change.
    withoutEnv: [REDIS_URL_ENV, REDIS_PASSWORD_ENV],
    ...(t.nodes > 1 && { nodes: { count: t.nodes, rank: t.node_rank, rendezvous: t.rendezvous!, timeoutS: t.rendezvous_timeout_s } }),
  };
}

/** The engine's optimizer settings: grpo.optimizer without `reset`, which is the train worker's to act on. */
export function engineOptimizer(config: RunConfig): OptimizerSettings {
  const { reset: _reset, ...optimizer } = config.grpo.optimizer;
  return optimizer;
}

/** The engine's `load` request for a run config: its model (or a checkpoint's), device, precision and optimizer. */
export function engineLoadArgs(config: RunConfig, ckpt: Checkpoint | undefined): LoadArgs {
  const train = config.workers.train;
  return {
    model_dir: ckpt?.dir ?? config.model.dir,
    device: train.device,
    dtype: config.model.dtype,
    autocast: train.autocast,
    autocast_cache: train.autocast_cache,
    threads: train.threads,
    lora: config.model.lora ?? null,
    gradient_checkpointing: train.gradient_checkpointing,
    resume: ckpt !== undefined,
    seed: config.run.seed,
    optimizer: engineOptimizer(config),
    deepspeed: train.deepspeed_config ? (JSON.parse(readFileSync(train.deepspeed_config, 'utf8')) as Record<string, unknown>) : null,
  };
}

export interface EngineSupervisorOptions {
  config: RunConfig;
  /** Where restart() finds checkpoints. */
  runDir: string;
  /** Overrides of how the engine process starts (tests). */
  engine?: EngineOptions;
  log?: (line: string) => void;
}

export class EngineSupervisor {
  private current: TrainEngine | undefined;
  private loadedFrom: string | undefined;
  /** Tag of the KL reference the engine holds (restored from the checkpoint), or null. */
  private reference: string | null = null;
  /** Tag of the reset the engine's optimizer dates from (restored from the checkpoint), or null. */
  private optimizerTag: string | null = null;
  private readonly log: (line: string) => void;

  constructor(private readonly opts: EngineSupervisorOptions) {
    this.log = opts.log ?? (() => undefined);
  }

  /** The open engine. */
  get engine(): TrainEngine {
    if (!this.current) throw new Error('train engine: not open');
    return this.current;
  }

  get pid(): number | undefined {
    return this.current?.pid;
  }

  /** Whether the engine process has exited (it died, or was disposed of). */
  get dead(): boolean {
    return this.current?.dead ?? true;
  }

  /** The checkpoint the live engine was loaded from (undefined: the base model). */
  get origin(): string | undefined {
    return this.loadedFrom;
  }

  /** Starts an engine on `ckpt` (or the base model); resolves with the updates it holds (the checkpoint's). */
  async open(ckpt: Checkpoint | undefined): Promise<number> {
    const { config } = this.opts;
    const engine = new TrainEngine({ ...engineLaunch(config), onStderr: (t) => this.log(t.trimEnd()), ...this.opts.engine });
    this.current = engine;
    try {
      const loaded = await engine.request('load', engineLoadArgs(this.opts.config, ckpt));
      this.loadedFrom = ckpt?.dir;
      this.reference = loaded.reference;
      this.optimizerTag = loaded.optimizer;
      this.log(`engine loaded ${ckpt ? `checkpoint ${ckpt.dir} (${ckpt.updates} updates)` : config.model.dir}: ${this.describe(loaded)}`);
    } catch (e) {
      await engine.dispose();
      throw e;
    }
    return ckpt?.updates ?? 0;
  }

  /**
   * Stops the engine (what is left of it) and opens a new one on the latest checkpoint at or
   * before update `target`; resolves with the updates it holds. The caller takes the updates
   * between again.
   */
  async restart(target: number): Promise<number> {
    await this.current?.dispose();
    const ckpt = listCheckpoints(this.opts.runDir)
      .filter((c) => c.updates <= target)
      .at(-1);
    return this.open(ckpt);
  }

  /** Takes the KL reference (grpo.reference) from the current policy before the first update of `stage` that needs it. */
  async ensureReference(stage: string, update: number): Promise<void> {
    const { grpo } = this.opts.config;
    if (grpo.loss.kl_coef === 0) return;
    const want = grpo.reference === 'grpo_start' ? 'grpo_start' : `stage_start:${stage}`;
    if (this.reference === want) return;
    this.reference = (await this.engine.request('set_reference', { tag: want })).reference;
    this.log(`KL reference: the policy before update ${update} (${want})`);
  }

  /** A new optimizer (grpo.optimizer.reset) before the first GRPO update of the run or of each stage. */
  async ensureFreshOptimizer(stage: string, update: number): Promise<void> {
    const policy = this.opts.config.grpo.optimizer.reset;
    if (policy === 'never') return;
    const want = policy === 'grpo' ? 'grpo' : `stage:${stage}`;
    if (this.optimizerTag === want) return;
    this.optimizerTag = (await this.engine.request('reset_optimizer', { tag: want })).optimizer;
    this.log(`optimizer reset before update ${update} (grpo.optimizer.reset ${policy}): AdamW starts with no state`);
  }

  /** Kills the engine at once (a busy one included). */
  async dispose(): Promise<void> {
    await this.current?.dispose();
  }

  /** Asks the engine to exit once its current request is done. */
  async shutdown(): Promise<void> {
    await this.current?.shutdown();
  }

  private describe(loaded: LoadResult): string {
    const plural = loaded.ranks > 1 ? 's' : '';
    return (
      `${loaded.parameters} parameters on ${loaded.device}${loaded.lora ? ` (LoRA: ${loaded.trainable_parameters} trainable)` : ''}, ` +
      `${loaded.ranks} rank${plural}, ${loaded.threads} threads, compute ${loaded.precision}` +
      `${this.reference ? `, KL reference ${this.reference}` : ''}${this.optimizerTag ? `, optimizer since reset ${this.optimizerTag}` : ''}`
    );
  }
}
