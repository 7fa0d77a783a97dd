/**
 * Shared by the queue and worker tests (the tiny model itself is testkit/tiny-model.ts):
 * a run config on the real Nezha dataset pointing at a model, and `trainer-ctl worker` child
 * processes whose stderr lines are collected.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createExpert, ExpertSettingsSchema, loadDataset, runEpisode, type Dataset, type EpisodeRecord } from '@thinkfl/env';
import { loadChatModel, tokenizeEpisode } from '@thinkfl/rollout';
import { expect } from 'vitest';
import type { Redis } from 'ioredis';
import { loadRunConfig, type LoadedRunConfig } from '../src/config/index';
import { connectRedis, type QueueSettings, type RolloutJob, type TrainJob, type TrainSample, type Trajectory } from '../src/queue/index';
import { startTrainWorker, type TrainWorker, type TrainWorkerOptions } from '../src/workers/index';
import { ensureNezhaDataset, NEZHA_DATASET, REPO_ROOT } from '../../../testkit/nezha';
import { startRedis, type TestRedis } from '../../../testkit/redis';
import { createTinyModel } from '../../../testkit/tiny-model';

export function scratch(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `h10-${prefix}-`));
}

/** What most worker tests stand on: a real redis-server, a queue connection to it, and a scratch directory. */
export interface WorkerGround {
  redis: TestRedis;
  conn: Redis;
  dir: string;
}

export async function openGround(prefix: string): Promise<WorkerGround> {
  const redis = await startRedis();
  return { redis, conn: connectRedis(redis.url), dir: scratch(prefix) };
}

/** Closes what openGround opened; safe to call when it never ran. */
export async function closeGround(ground: WorkerGround | undefined): Promise<void> {
  ground?.conn.disconnect();
  await ground?.redis.stop();
  if (ground) rmSync(ground.dir, { recursive: true, force: true });
}

/** What the train worker tests stand on: the ground, the Nezha dataset, a tiny model with a run config on it, and expert samples. */
export interface TrainGround extends WorkerGround {
  dataset: Dataset;
  model: string;
  loaded: LoadedRunConfig;
  samples: TrainSample[];
}

/** openGround, then a tiny model (`seed`) in it, the run config of `run` on it and expertSamples with `advantages`. */
export async function openTrainGround(prefix: string, run: string, seed: number, advantages: number[]): Promise<TrainGround> {
  const ground = await openGround(prefix);
  try {
    const dataset = await loadDataset(await ensureNezhaDataset());
    const model = await createTinyModel(join(ground.dir, 'model'), seed);
    const loaded = writeRunConfig(ground.dir, run, model);
    return { ...ground, dataset, model, loaded, samples: await expertSamples(dataset, model, advantages) };
  } catch (e) {
    await closeGround(ground);
    throw e;
  }
}

/** The real train worker (id `trainer`) of a loaded run config; `more` adds options such as a log or hooks. */
/** A stage-1 GRPO train job of `samples` for update `update` of run `run`. */
export const grpoJob = (run: string, samples: TrainSample[], update: number, checkpoint = false): TrainJob => ({
  run_id: run,
  stage: 'priming',
  update,
  kind: 'grpo',
  samples,
  checkpoint,
});

export function startTrainer(
  conn: Redis,
  runId: string,
  settings: QueueSettings,
  loaded: LoadedRunConfig,
  more: Partial<TrainWorkerOptions> = {},
): Promise<TrainWorker> {
  return startTrainWorker({
    connection: conn,
    runId,
    workerId: 'trainer',
    settings,
    config: loaded.config,
    runDir: loaded.runDir,
    ...more,
  });
}

/**
 * The run, model, dataset and episode lines every worker test's run config starts with: the
 * tiny model at float32 on the real Nezha dataset, outputs under <dir>/runs; `model` adds
 * entries to the model mapping.
 */
export function runConfigHead(dir: string, name: string, modelDir: string, model?: string): string {
  return `run: { name: ${name}, output_dir: ${join(dir, 'runs')}, seed: 0 }
model: { dir: ${modelDir}, dtype: float32, max_context_tokens: 4096${model ? `, ${model}` : ''} }
dataset: { path: ${NEZHA_DATASET} }
episode: { protocol: rot, d_max: 3, tool_settings: { span_aliases: true } }
`;
}

/**
 * A run config for the tiny model on the real Nezha dataset, written to <dir>/run.yaml (or
 * `opts.file`); `opts.model` adds entries to the model mapping (e.g. `lora: {...}`), `opts.train`
 * is workers.train as a flow mapping.
 */
export function writeRunConfig(
  dir: string,
  name: string,
  modelDir: string,
  extra = '',
  opts: { file?: string; model?: string; train?: string } = {},
): LoadedRunConfig {
  const file = join(dir, opts.file ?? 'run.yaml');
  writeFileSync(
    file,
    `${runConfigHead(dir, name, modelDir, opts.model)}generation:
  backend: { kind: onnx, threads: 1 }
  sampling: { max_tokens: 64 }
grpo: { group_size: 4, loss: { kl_coef: 0.001 }, optimizer: { lr: 1.0e-3 } }
workers: { rollout: { concurrency: 1 }, sync_timeout_s: 60${opts.train ? `, train: ${opts.train}` : ''} }
${extra}`,
  );
  return loadRunConfig(file);
}

export interface WorkerProcess {
  child: ChildProcess;
  /** Every stderr line so far. */
  lines: string[];
  /** Resolves with the first line matching `re` (already seen or to come). */
  waitLine(re: RegExp, timeoutMs?: number): Promise<string>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * `trainer-ctl worker <args>` with stderr collected; `env` adds to the environment; `group`
 * makes it lead its own process group, as a command started from a shell is.
 */
export function spawnWorker(args: string[], env: Record<string, string> = {}, group = false): WorkerProcess {
  const child = spawn(process.execPath, [join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs'), 'worker', ...args], {
    cwd: REPO_ROOT,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, ...env },
    detached: group,
  });
  const lines: string[] = [];
  const watchers = new Set<() => void>();
  let partial = '';
  child.stderr!.setEncoding('utf8').on('data', (text: string) => {
    const parts = (partial + text).split('\n');
    partial = parts.pop() ?? '';
    lines.push(...parts);
    for (const w of watchers) w();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((done) =>
    child.once('exit', (code, signal) => {
      for (const w of watchers) w();
      done({ code, signal });
    }),
  );
  const waitLine = (re: RegExp, timeoutMs = 120_000) =>
    new Promise<string>((resolve, reject) => {
      const check = () => {
        const hit = lines.find((l) => re.test(l));
        if (hit !== undefined) return finish(null, hit);
        if (child.exitCode !== null || child.signalCode !== null) finish(new Error(`worker exited before ${re}:\n${lines.join('\n')}`));
      };
      const finish = (err: Error | null, line?: string) => {
        clearTimeout(timer);
        watchers.delete(check);
        if (err) reject(err);
        else resolve(line as string);
      };
      const timer = setTimeout(() => finish(new Error(`no line ${re} within ${timeoutMs} ms:\n${lines.join('\n')}`)), timeoutMs);
      watchers.add(check);
      check();
    });
  return { child, lines, waitLine, exited };
}

/** What a rollout player returns for job `j` when it generated all of `ids`, each at log-probability -1, taking no time. */
export function plainTrajectory(
  j: RolloutJob,
  ids: number[],
  episode: EpisodeRecord,
  temperature = j.temperature,
): Omit<Trajectory, 'worker_id'> {
  return {
    group_id: j.group_id,
    case_id: j.case_id,
    sample_index: j.sample_index,
    policy_version: 0,
    ids,
    mask: ids.map(() => 1),
    logprobs: ids.map(() => -1),
    temperature,
    episode,
    timing: { generate_ms: 0, tools_ms: 0, wall_ms: 0 },
  };
}

/**
 * Real expert episodes on the dataset's cases from `firstCase` on (3 tool turns, span aliases),
 * tokenized with the model's own chat template: one train sample per advantage, sampled at
 * temperature 1 (an SFT job's samples carry advantage 0).
 */
export async function expertSamples(dataset: Dataset, modelDir: string, advantages: number[], firstCase = 0): Promise<TrainSample[]> {
  const chat = loadChatModel(modelDir);
  const expert = createExpert(dataset, ExpertSettingsSchema.parse({}));
  const samples: TrainSample[] = [];
  for (const [i, c] of dataset.cases.slice(firstCase, firstCase + advantages.length).entries()) {
    const ep = await runEpisode({ dataset, case: c, policy: expert, settings: { d_max: 3, tool_settings: { span_aliases: true } } });
    const { ids, mask } = tokenizeEpisode(ep.messages, chat.template, chat.tokenizer);
    samples.push({ ids, mask, advantage: advantages[i], temperature: 1 });
  }
  return samples;
}

/**
 * Learning beyond the spread between seeds: `run(seed)` gives one seed's group mean reward at
 * steps 0..`steps`; every seed's last must exceed the highest first of all seeds.
 */
export async function expectGainBeyondSeedSpread(run: (seed: number) => Promise<number[]>, seeds: number[], steps: number): Promise<void> {
  const curves: number[][] = [];
  for (const seed of seeds) curves.push(await run(seed));
  const initial = curves.map((c) => c[0]);
  const final = curves.map((c) => c[steps]);
  console.log(`group mean reward per step, per seed: ${curves.map((c) => c.map((x) => x.toFixed(3)).join(' ')).join(' | ')}`);
  expect(Math.min(...final)).toBeGreaterThan(Math.max(...initial));
}
