/**
 * Faults injected into a real `trainer-ctl train` run (tiny model, real Nezha cases, embedded
 * Redis, worker child processes, the Python engine), at named points, and a run's end compared
 * with an unbroken run of the same config. Shared by the fault-matrix and preset fault tests and
 * by scripts/fault-scenarios.ts, which runs the README's main job itself.
 *
 * A run config comes from a shipped preset, with only its lengths shortened (data, SFT
 * conversations, steps per stage): its checkpoint retention, train worker (autocast, micro
 * batches), group settings and LoRA are the preset's, because those are what a fault meets.
 * One change more: each rollout worker plays one episode at a time (two workers instead of one
 * worker playing two). Episodes played together are decoded as one batch, and a row's logits then
 * depend on which rows share its batch (last bits), which is timing: two unbroken runs of the
 * same config and seed ended 5.6e-4 apart in their weights that way, without any fault. Decoded
 * alone, a run is reproducible, so a difference from the unbroken run is the fault's.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import type { Redis } from 'ioredis';
import { readMetrics } from '../src/run-files/metrics-log';
import { readState } from '../src/run-files/state';
import { NEZHA_DATASET, REPO_ROOT } from '../../../testkit/nezha';
import {
  activeTrainJob,
  alive,
  enginePid,
  finalCheckpoint,
  maxWeightDiff,
  recordedProcesses,
  runRedis,
  spawnTrain,
  until,
  type Exit,
  type TrainProcess,
} from './train-fixtures';

/** What is killed: one process of the run, or the whole tree by a terminal's Ctrl-C. */
export const FAULT_KINDS = ['engine', 'rollout-worker', 'train-worker', 'controller', 'redis', 'sigint-tree'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/**
 * When: during the SFT train job of `update`; during the GRPO train job of `update` (its groups
 * all rolled out and graded); while the train worker exports the policy that `update` made.
 */
export const FAULT_POINTS = ['sft', 'grpo-graded', 'export'] as const;
export type FaultPoint = (typeof FAULT_POINTS)[number];

export interface Fault {
  kind: FaultKind;
  point: FaultPoint;
  update: number;
}

/** How a fault ended: the run went on by itself, or it stopped (exit code or signal) and was resumed. */
export interface FaultOutcome extends Fault {
  recovery: 'went on by itself' | 'stopped, resumed';
  /** The controller's exit when the fault stopped the run. */
  exit?: { code: number | null; signal: NodeJS.Signals | null };
  /** ms from the fault until the controller and every process it recorded (and the engine) were gone. */
  stopMs?: number;
  /** Updates the run made after the fault's update. */
  updatesAfter?: number;
}

/** A preset's YAML as an object, with deep overrides; paths made absolute so the file can live anywhere. */
export function presetConfig(preset: string, overrides: Record<string, unknown>): Record<string, unknown> {
  const raw = parse(readFileSync(join(REPO_ROOT, 'configs', `${preset}.yaml`), 'utf8')) as Record<string, unknown>;
  const merged = merge(raw, overrides) as Record<string, unknown>;
  (merged.run as Record<string, unknown>).base_dir = REPO_ROOT;
  return merged;
}

function merge(base: unknown, over: unknown): unknown {
  if (over === undefined) return base;
  if (!isObject(base) || !isObject(over)) return over;
  const out: Record<string, unknown> = { ...base };
  for (const [k, v] of Object.entries(over)) out[k] = merge(base[k], v);
  return out;
}

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);

export function writeConfig(file: string, config: Record<string, unknown>): string {
  writeFileSync(file, stringify(config));
  return file;
}

/**
 * A preset shortened for a fault test: the model in `modelDir` (testkit/warm-model.ts: the
 * preset's tiny model after its SFT), the real dataset, 1 case per fault, 1 held-out case,
 * SFT on `sftConversations` teacher conversations in updates of `sftStepsPerUpdate` optimizer
 * steps, and the given GRPO steps per stage.
 */
export function shortPreset(
  preset: string,
  modelDir: string,
  name: string,
  lengths: { sftConversations: number; sftStepsPerUpdate: number; steps: [number, number, number] },
  extra: Record<string, unknown> = {},
): Record<string, unknown> {
  const [priming, exploration, refinement] = lengths.steps;
  return presetConfig(
    preset,
    merge(
      {
        run: { name },
        model: { dir: modelDir },
        workers: { rollout: { count: 2, concurrency: 1 } },
        dataset: { path: NEZHA_DATASET, max_cases_per_fault: 1, max_eval_cases: 1 },
        stages: {
          priming: {
            sft: {
              conversations: lengths.sftConversations,
              variants: 1,
              epochs: 1,
              steps_per_update: lengths.sftStepsPerUpdate,
              warmup_steps: 1,
            },
            steps: priming,
          },
          exploration: { steps: exploration, repeats: 1 },
          refinement: { steps: refinement },
        },
      },
      extra,
    ) as Record<string, unknown>,
  );
}

/** Whether the run is at the fault's point now. */
async function atPoint(f: Fault, runDir: string, redis: Redis, runId: string): Promise<boolean> {
  if (f.point === 'export') {
    const root = join(runDir, 'policies');
    return existsSync(root) && readdirSync(root).some((n) => n.startsWith(`v${f.update + 1}.tmp-`));
  }
  const job = await activeTrainJob(redis, runId).catch(() => undefined);
  return job !== undefined && job.update === f.update && job.kind === (f.point === 'sft' ? 'sft' : 'grpo');
}

function pidOf(runDir: string, role: string): number {
  const p = recordedProcesses(runDir).find((r) => r.role === role);
  if (!p) throw new Error(`${runDir}: no ${role} process recorded`);
  return p.pid;
}

/** Kills what the fault names; true when that stops the run (it must be resumed). */
function inject(kind: FaultKind, run: TrainProcess, runDir: string): boolean {
  switch (kind) {
    case 'engine': {
      const pid = enginePid(runDir);
      if (pid === undefined) throw new Error(`${runDir}: no engine process`);
      process.kill(pid, 'SIGKILL');
      return false;
    }
    case 'redis':
      process.kill(pidOf(runDir, 'redis'), 'SIGKILL');
      return false;
    case 'rollout-worker':
      process.kill(pidOf(runDir, 'rollout-0'), 'SIGKILL');
      return true;
    case 'train-worker':
      process.kill(pidOf(runDir, 'train'), 'SIGKILL');
      return true;
    case 'controller':
      run.child.kill('SIGKILL');
      return true;
    case 'sigint-tree':
      // What Ctrl-C in a terminal does: SIGINT to every process of the foreground group.
      process.kill(-run.child.pid!, 'SIGINT');
      return true;
  }
}

export interface FaultRun {
  outcomes: FaultOutcome[];
  /** The last controller's exit (0 when the run finished). */
  exit: Exit;
  /** Every controller's output, in order. */
  output: string;
}

/**
 * Runs `configFile` into `runDir`, injecting `faults` in order (each at its point); a fault that
 * stops the run is followed by `--resume` (after `beforeResume`, if given). Resolves when a
 * controller exits without a fault pending: the finished run, or a failure to look at.
 */
export async function runWithFaults(
  configFile: string,
  runDir: string,
  runId: string,
  faults: readonly Fault[],
  hooks: { beforeResume?: (f: Fault) => void; log?: (line: string) => void } = {},
): Promise<FaultRun> {
  const log = hooks.log ?? (() => undefined);
  let run = spawnTrain(configFile, runDir, [], { group: true });
  let output = '';
  const outcomes: FaultOutcome[] = [];
  const redisConns: Redis[] = [];
  try {
    for (const f of faults) {
      const redis = await runRedis(runDir, run);
      redisConns.push(redis);
      let ended: Exit | undefined;
      void run.exited.then((e) => (ended = e));
      await until(
        `${f.point} of update ${f.update}`,
        async () => ended !== undefined || (await atPoint(f, runDir, redis, runId)),
        900_000,
        10,
      );
      if (ended)
        throw new Error(
          `the run exited (code ${ended.code}) before ${f.kind} at ${f.point} of update ${f.update}:\n${ended.output.slice(-3000)}`,
        );
      log(`fault: ${f.kind} at ${f.point} of update ${f.update}`);
      const tree = [...recordedProcesses(runDir).map((p) => p.pid), enginePid(runDir)].filter((p): p is number => p !== undefined);
      const t0 = Date.now();
      const stops = inject(f.kind, run, runDir);
      if (!stops) {
        outcomes.push({ ...f, recovery: 'went on by itself' });
        continue;
      }
      const exit = await run.exited;
      output += exit.output;
      // A controller killed outright leaves its children to the resume, which stops them first.
      if (f.kind !== 'controller') await until('every process of the run to be gone', () => tree.every((p) => !alive(p)), 60_000);
      const stopMs = Date.now() - t0;
      outcomes.push({ ...f, recovery: 'stopped, resumed', exit: { code: exit.code, signal: exit.signal }, stopMs });
      redis.disconnect();
      hooks.beforeResume?.(f);
      run = spawnTrain(configFile, runDir, ['--resume'], { group: true });
    }
    const exit = await run.exited;
    output += exit.output;
    const updates = readState(runDir)?.updates ?? 0;
    for (const o of outcomes) o.updatesAfter = updates - (o.update + 1);
    return { outcomes, exit, output };
  } finally {
    for (const r of redisConns) r.disconnect();
  }
}

/** Per GRPO step: its key, its samples' rewards and advantages, and its loss. */
export function grpoFigures(runDir: string) {
  return readMetrics(runDir)
    .filter((m) => m.kind === 'grpo')
    .map((m) => ({
      step: `${m.stage}:${m.step}`,
      rewards: m.rewards,
      advantages: m.advantages,
      loss: (m.train as Record<string, number> | undefined)?.loss,
    }));
}

/** How a finished run differs from an unbroken one: an empty `problems` means it ended the same. */
export function compareWithUnbroken(runDir: string, unbrokenDir: string): { weightDiff: number; problems: string[] } {
  const problems: string[] = [];
  const a = readState(runDir);
  const b = readState(unbrokenDir)!;
  if (!a?.done) problems.push('the run did not finish');
  if (a && a.updates !== b.updates) problems.push(`${a.updates} updates, the unbroken run made ${b.updates}`);
  const keys = (d: string) => readMetrics(d).map((m) => (m.kind === 'sft' ? `sft:${m.update}` : `${m.stage}:${m.step}`));
  if (JSON.stringify(keys(runDir)) !== JSON.stringify(keys(unbrokenDir)))
    problems.push(`metrics lines ${keys(runDir).join(',')} vs ${keys(unbrokenDir).join(',')}`);
  const mine = grpoFigures(runDir);
  const want = grpoFigures(unbrokenDir);
  want.forEach((w, i) => {
    const m = mine[i];
    if (!m) return;
    if (JSON.stringify(m.rewards) !== JSON.stringify(w.rewards))
      problems.push(`${w.step}: rewards ${JSON.stringify(m.rewards)} vs ${JSON.stringify(w.rewards)}`);
    if (JSON.stringify(m.advantages) !== JSON.stringify(w.advantages)) problems.push(`${w.step}: advantages differ`);
    if (typeof w.loss === 'number' && !(Math.abs((m.loss ?? NaN) - w.loss) <= 1e-6 * Math.max(1, Math.abs(w.loss))))
      problems.push(`${w.step}: loss ${m.loss} vs ${w.loss}`);
  });
  let weightDiff = NaN;
  if (a?.done) {
    weightDiff = maxWeightDiff(finalCheckpoint(runDir), finalCheckpoint(unbrokenDir));
    if (!(weightDiff <= 1e-6)) problems.push(`final weights differ by ${weightDiff}`);
  }
  return { weightDiff, problems };
}

/** Processes the run directory still records as running (none once a run has ended). */
export function leftovers(runDir: string): number[] {
  return recordedProcesses(runDir)
    .map((p) => p.pid)
    .filter(alive);
}
