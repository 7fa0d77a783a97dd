/**
 * Shared by the tests of the `vllm` backend against `trainer-ctl serve` replicas (vllm-sync,
 * vllm-colocate-resume): a LoRA run config of the tiny Llama, an SFT update on scripted-expert
 * conversations, the `trainer-ctl worker rollout` process with the step context over it, and
 * what a replica itself reports (its models and its per-model generation counters).
 */
import { writeFileSync } from 'node:fs';
import { expect } from 'vitest';
import type { Dataset } from '@thinkfl/env';
import { loadRunConfig, type LoadedRunConfig } from '../src/config/index';
import { RedisTransport, runCases, type StepContext } from '../src/controller/index';
import { TrainQueue, type QueueSettings, type Trajectory } from '../src/queue/index';
import type { TrainWorker } from '../src/workers/index';
import { generatedRuns } from '../../../testkit/masks';
import { readMetrics, type ServeProcess } from './serve-fixtures';
import { expertSamples, runConfigHead, spawnWorker, type WorkerGround, type WorkerProcess } from './workers-fixtures';

/**
 * Writes a run config of the tiny model with a LoRA adapter (r 4 on q_proj and v_proj) to `file`:
 * runConfigHead, then `rest` (the generation, grpo and workers sections).
 */
export function writeLoraRunConfig(ground: WorkerGround, file: string, run: string, modelDir: string, rest: string): LoadedRunConfig {
  writeFileSync(file, `${runConfigHead(ground.dir, run, modelDir, 'lora: { r: 4, alpha: 8, target_modules: [q_proj, v_proj] }')}${rest}`);
  return loadRunConfig(file);
}

/**
 * SFT update `update` on the scripted expert's conversations of the 4 cases from `firstCase` on,
 * as the trainer's priming makes them; `lr` sets its one step's learning rate. It must publish
 * version update+1.
 */
export async function sftUpdate(
  ground: WorkerGround,
  run: string,
  settings: QueueSettings,
  data: { dataset: Dataset; modelDir: string },
  job: { update: number; firstCase: number; checkpoint: boolean; lr?: number },
): Promise<void> {
  const samples = await expertSamples(data.dataset, data.modelDir, [0, 0, 0, 0], job.firstCase);
  const queue = new TrainQueue(ground.conn, run, settings);
  await queue.submit({
    run_id: run,
    stage: 'priming',
    update: job.update,
    kind: 'sft',
    samples,
    checkpoint: job.checkpoint,
    ...(job.lr !== undefined && { sft_steps: [{ size: samples.length, lr: job.lr }] }),
  });
  expect((await queue.waitResult(job.update, 300_000)).version).toBe(job.update + 1);
  await queue.close();
}

export interface RolloutSide {
  rollout: WorkerProcess;
  transport: RedisTransport;
  ctx: StepContext;
}

/** `trainer-ctl worker rollout` on the run config `file` (4 episodes at once), once ready; the transport and step context over it. */
export async function startRolloutSide(
  ground: WorkerGround,
  file: string,
  loaded: LoadedRunConfig,
  dataset: Dataset,
): Promise<RolloutSide> {
  const run = loaded.config.run.name;
  const rollout = spawnWorker(['rollout', '--config', file, '--redis', ground.redis.url, '--id', 'R', '--concurrency', '4']);
  await rollout.waitLine(/ready on/, 180_000);
  const transport = new RedisTransport(ground.redis.url, run);
  return {
    rollout,
    transport,
    ctx: { config: loaded.config, dataset, runId: run, train: runCases(dataset, loaded.config).train, transport },
  };
}

/** Stops what was started of a run, in this order: the rollout worker (SIGTERM), the transport, the train worker. */
export async function stopRunSides(rollout?: WorkerProcess, transport?: RedisTransport, trainer?: TrainWorker): Promise<void> {
  if (rollout && rollout.child.exitCode === null) {
    rollout.child.kill('SIGTERM');
    await rollout.exited;
  }
  await transport?.close();
  await trainer?.close();
}

/** The models a replica lists, with the directory each was loaded from. */
export const modelCards = async (r: ServeProcess) =>
  ((await (await fetch(`${r.url}/models`)).json()) as { data: { id: string; root: string }[] }).data;

/** Generations the replica has made with `model` (its own counter). */
export const generationsOn = async (r: ServeProcess, model: string) =>
  (await readMetrics(r.origin))[`thinkfl_model_generations_total{model="${model}"}`] ?? 0;

/** Generation requests behind the trajectories: one per generated stretch (run of mask 1). */
export const generationCount = (ts: Trajectory[]) => ts.reduce((a, t) => a + generatedRuns(t.ids, t.mask).length, 0);
