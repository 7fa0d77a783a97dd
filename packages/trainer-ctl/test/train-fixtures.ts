/**
 * Shared by the `trainer-ctl train` end-to-end tests: a very small run config (tiny model made
 * by the run, real Nezha cases, embedded Redis, worker child processes), the CLI as a child
 * process with its output collected, and ways to look into a running run: its Redis (from
 * run.json), its processes (processes.json and /proc), its final weights.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { readMetrics } from '../src/run-files/metrics-log';
import { readState, type RunState } from '../src/run-files/state';
import type { ProcessRecord } from '../src/controller/index';
import { connectRedis, keys, type TrainJob } from '../src/queue/index';
import { latestCheckpoint } from '../src/workers/run-files';
import { ENGINE_PYTHON } from '../src/engine/index';
import { NEZHA_DATASET, REPO_ROOT } from '../../../testkit/nezha';

export const CLI = join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs');

export interface TinyRunOptions {
  /** stages.priming.sft as a YAML flow mapping. */
  sft?: string;
  /** workers.train as a YAML flow mapping. */
  train?: string;
}

const SFT = '{ conversations: 4, epochs: 1, batch_size: 2, optimizer: { lr: 1.0e-3 } }';

/**
 * The run, model, dataset, episode, generation and grpo sections of a tiny run: the model created
 * by the run (seed 0) in <scratch>/model, 2 cases per fault, `episode` as a flow mapping, groups
 * of 2 of one case a step, every group an update (skip_equal_groups off); grpo stays open for more keys.
 */
export function tinyRunHead(scratch: string, name: string, episode: string): string {
  return `run: { name: ${name}, seed: 0 }
model:
  dir: ${join(scratch, 'model')}
  dtype: float32
  max_context_tokens: 4096
  create_tiny: { seed: 0, hidden_size: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate_size: 128 }
dataset: { path: ${NEZHA_DATASET}, max_cases_per_fault: 2, max_eval_cases: 2 }
episode: ${episode}
generation:
  backend: { kind: onnx, threads: 1 }
  sampling: { max_tokens: 24 }
grpo:
  group_size: 2
  cases_per_step: 1
  max_refill_groups: 0
  advantage: { skip_equal_groups: false }
  optimizer: { lr: 1.0e-3 }
`;
}

/** A run config: 2 cases per fault, groups of 2, GRPO steps 2 + 1 + 1, a checkpoint every update. */
export function tinyRunYaml(scratch: string, name: string, opts: TinyRunOptions = {}): string {
  return `${tinyRunHead(scratch, name, '{ protocol: rot, d_max: 4, tool_settings: { span_aliases: true } }')}  loss: { kl_coef: 0.05 }
stages:
  priming: { sft: ${opts.sft ?? SFT}, steps: 2 }
  exploration: { steps: 1, repeats: 1 }
  refinement: { steps: 1 }
workers:
  rollout: { count: 1, concurrency: 2 }
  train: ${opts.train ?? '{}'}
checkpoints: { every_steps: 1 }
`;
}

/** GRPO steps of tinyRunYaml, each making an update (skip_equal_groups off). */
export const GRPO_STEPS = ['priming:0', 'priming:1', 'exploration:0', 'refinement:0'];

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** stdout and stderr together, in arrival order. */
  output: string;
  stdout: string;
}

export interface TrainProcess {
  child: ChildProcess;
  exited: Promise<Exit>;
}

/** `group`: the controller leads its own process group, as a command started in a terminal does (Ctrl-C reaches the group). */
export function spawnTrain(configFile: string, runDir: string, extra: string[] = [], opts: { group?: boolean } = {}): TrainProcess {
  const child = spawn(process.execPath, [CLI, 'train', configFile, '--run-dir', runDir, ...extra], {
    cwd: REPO_ROOT,
    detached: opts.group ?? false,
  });
  let output = '';
  let stdout = '';
  child.stderr!.on('data', (b: Buffer) => (output += b));
  child.stdout!.on('data', (b: Buffer) => {
    output += b;
    stdout += b;
  });
  const exited = new Promise<Exit>((done) => child.on('exit', (code, signal) => done({ code, signal, output, stdout })));
  return { child, exited };
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `trainer-ctl <args>` to its exit, its stdout and stderr collected. */
export function runCli(args: string[]): Promise<CliResult> {
  const child = spawn(process.execPath, [CLI, ...args], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b: Buffer) => (stdout += b));
  child.stderr.on('data', (b: Buffer) => (stderr += b));
  return new Promise((done) => child.on('exit', (code) => done({ code, stdout, stderr })));
}

/** The SFT update and GRPO step keys of metrics.jsonl, in order. */
export function stepKeys(runDir: string): string[] {
  return readMetrics(runDir).map((m) => (m.kind === 'sft' ? `sft:${m.update}` : `${m.stage}:${m.step}`));
}

/** One key per SFT update (steps of `batchSize` kept teacher conversations, `stepsPerUpdate` a job), then GRPO_STEPS. */
export function expectedKeys(runDir: string, batchSize = 2, stepsPerUpdate = 1): string[] {
  const n = (JSON.parse(readFileSync(join(runDir, 'teacher-samples.json'), 'utf8')) as unknown[]).length;
  const updates = Math.ceil(Math.ceil(n / batchSize) / stepsPerUpdate);
  return [...Array.from({ length: updates }, (_, i) => `sft:${i}`), ...GRPO_STEPS];
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function recordedProcesses(runDir: string): ProcessRecord[] {
  const file = join(runDir, 'processes.json');
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as ProcessRecord[]) : [];
}

/** Every live descendant of `pid` (from /proc), children first. */
export function descendants(pid: number): number[] {
  const parent = new Map<number, number>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      parent.set(Number(d), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const [c, pp] of parent) {
      if (pp === p) {
        out.push(c);
        walk(c);
      }
    }
  };
  walk(pid);
  return out;
}

/**
 * The pid of the train engine as its train worker sees it: its python child, the engine itself or the
 * shim of an engine forked from a template (killing the shim kills the engine). Not the template.
 */
export function enginePid(runDir: string): number | undefined {
  const train = recordedProcesses(runDir).find((p) => p.role === 'train');
  if (!train) return undefined;
  return descendants(train.pid).find((p) => {
    try {
      const cmdline = readFileSync(`/proc/${p}/cmdline`, 'utf8');
      return cmdline.includes('thinkfl_engine') && !cmdline.includes('thinkfl_engine.template');
    } catch {
      return false;
    }
  });
}

/** Polls `check` every `everyMs` until it returns a value; fails after timeoutMs. */
export async function until<T>(
  what: string,
  check: () => T | undefined | Promise<T | undefined>,
  timeoutMs = 600_000,
  everyMs = 20,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== null && (v as unknown) !== false) return v;
    if (Date.now() > end) throw new Error(`waited ${timeoutMs} ms for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/**
 * A connection to the Redis of the run `run` started, once its run.json names it (an earlier
 * controller's run.json names a server that is gone). Errors ignored: the server may be killed.
 */
export async function runRedis(runDir: string, run: TrainProcess): Promise<Redis> {
  const file = join(runDir, 'run.json');
  const url = await until('run.json of this controller', () => {
    if (!existsSync(file)) return undefined;
    const info = JSON.parse(readFileSync(file, 'utf8')) as { redis_url: string; pid: number };
    return info.pid === run.child.pid ? info.redis_url : undefined;
  });
  const r = connectRedis(url);
  r.on('error', () => undefined);
  return r;
}

/** The data of a job of the run's queue that is running now, if one is (BullMQ's keys, read directly). */
async function activeJob<T>(redis: Redis, queue: string, prefix: string): Promise<T | undefined> {
  const ids = await redis.lrange(`${prefix}:${queue}:active`, 0, -1);
  if (ids.length === 0) return undefined;
  const data = await redis.hget(`${prefix}:${queue}:${ids[0]}`, 'data');
  return data ? (JSON.parse(data) as T) : undefined;
}

export const activeTrainJob = (redis: Redis, runId: string, prefix = 'thinkfl') =>
  activeJob<TrainJob>(redis, keys.trainQueue(runId), prefix);

export function stateOf(runDir: string): RunState | undefined {
  return existsSync(join(runDir, 'state.json')) ? readState(runDir) : undefined;
}

/** Max absolute difference of two checkpoints' weights (a LoRA checkpoint's: its adapter), as torch reads them (an independent reader). */
export function maxWeightDiff(a: string, b: string): number {
  const py = [
    'import os, sys',
    'from safetensors.torch import load_file',
    "name = 'adapter_model.safetensors' if os.path.exists(sys.argv[1] + '/adapter_model.safetensors') else 'model.safetensors'",
    "x = load_file(sys.argv[1] + '/' + name)",
    "y = load_file(sys.argv[2] + '/' + name)",
    'assert x.keys() == y.keys(), (sorted(x), sorted(y))',
    'print(max(float((x[k].double() - y[k].double()).abs().max()) for k in x))',
  ].join('\n');
  return Number(execFileSync(ENGINE_PYTHON, ['-c', py, a, b], { encoding: 'utf8' }).trim());
}

export function finalCheckpoint(runDir: string): string {
  const c = latestCheckpoint(runDir);
  if (!c) throw new Error(`${runDir}: no checkpoint`);
  return c.dir;
}

/**
 * The one-line reports of an outage the code makes on purpose: the controller's reporter once per
 * outage, and a worker connection once per reconnect attempt (issue 15: no stack trace).
 */
const HANDLED_OUTAGE = /redis connection lost \(|Redis \S+ unreachable \(connect ECONNREFUSED [^)]*\); attempt \d+ in \d+ ms$/;

/**
 * Lines that show an error nobody handled: ioredis's and node's unhandled reports, stack
 * frames, connection errors other than the deliberate one-line outage reports above.
 */
export function unhandledErrors(text: string): string[] {
  return text.split('\n').filter((l) => /unhandled|^\s+at .*:\d+:\d+\)?$/i.test(l) || (/ECONNREFUSED/.test(l) && !HANDLED_OUTAGE.test(l)));
}
