/**
 * `trainer-ctl train` end to end on a very small run (tiny model created by the run itself,
 * real Nezha cases, embedded Redis, worker child processes, fixed seed, CPU): an unbroken run,
 * a run whose controller is SIGKILLed in the middle of stage 1, and one SIGKILLed in a stage-2
 * step after its groups were graded (its train job submitted). Each resumed run ends like the
 * unbroken one: the same updates, one metrics line per SFT update and per step, the same
 * per-step rewards and advantages, the same final weights (max abs difference <= 1e-6), every
 * evaluation written, and no process of theirs left running.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readMetrics, readState, type RunState } from '../src/controller/index';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { readTensorboardScalars } from '../../../testkit/tensorboard';
import {
  activeTrainJob,
  alive,
  expectedKeys,
  finalCheckpoint,
  maxWeightDiff,
  recordedProcesses,
  runRedis,
  spawnTrain,
  stateOf,
  stepKeys,
  tinyRunYaml,
  until,
} from './train-fixtures';

const RUN = 'resume-test';
let scratch: string;
let configFile: string;
const TIMEOUT = 900_000;

beforeAll(async () => {
  await ensureNezhaDataset();
  scratch = mkdtempSync(join(tmpdir(), 'h11-train-'));
  configFile = join(scratch, 'run.yaml');
  writeFileSync(configFile, tinyRunYaml(scratch, RUN));
});

afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

/** Per GRPO step: its samples' rewards and advantages. */
function grpoFigures(runDir: string) {
  return readMetrics(runDir)
    .filter((m) => m.kind === 'grpo')
    .map((m) => ({ step: `${m.stage}:${m.step}`, rewards: m.rewards, advantages: m.advantages, loss: (m.train as Record<string, number>).loss }));
}

describe('trainer-ctl train', () => {
  let unbroken: RunState;
  const unbrokenDir = () => join(scratch, 'unbroken');

  /** A resumed run ended exactly as the unbroken one. */
  function expectSameAsUnbroken(runDir: string): void {
    const final = readState(runDir)!;
    expect(final.done).toBe(true);
    expect(final.updates).toBe(unbroken.updates);
    expect(stepKeys(runDir)).toEqual(expectedKeys(runDir));
    const figures = grpoFigures(runDir);
    expect(figures.map((f) => f.step)).toEqual(grpoFigures(unbrokenDir()).map((f) => f.step));
    const want = grpoFigures(unbrokenDir());
    // Rewards and advantages are exact; the loss is a float sum over 2 torch threads, whose last bits
    // can differ between processes (seen: 0.0001928198544 vs ...7526), within the weights' 1e-6 bar.
    expect(figures.map(({ loss: _, ...f }) => f)).toEqual(want.map(({ loss: _, ...f }) => f));
    figures.forEach((f, i) => expect(Math.abs(f.loss - want[i].loss)).toBeLessThanOrEqual(1e-6 * Math.max(1, Math.abs(want[i].loss))));
    const diff = maxWeightDiff(finalCheckpoint(runDir), finalCheckpoint(unbrokenDir()));
    console.log(`${runDir}: max abs weight difference to the unbroken run ${diff}`);
    expect(diff).toBeLessThanOrEqual(1e-6);
  }

  it('runs all three stages: SFT, GRPO steps, a checkpoint and an evaluation per stage', async () => {
    const runDir = unbrokenDir();
    const r = await spawnTrain(configFile, runDir).exited;
    expect(r.code, r.output).toBe(0);
    expect(readFileSync(join(scratch, 'model', 'onnx', 'model.onnx')).length).toBeGreaterThan(0);
    unbroken = readState(runDir)!;
    const keys = expectedKeys(runDir);
    expect(keys.length).toBeGreaterThan(4);
    expect(unbroken.done).toBe(true);
    expect(unbroken.updates).toBe(keys.length);
    expect(unbroken.policyVersion).toBe(keys.length);
    expect(stepKeys(runDir)).toEqual(keys);
    for (const name of ['sft', 'priming', 'exploration', 'refinement']) {
      const report = JSON.parse(readFileSync(join(runDir, `eval-${name}.json`), 'utf8'));
      expect(report.cases).toBe(2);
      expect(report.summary.perFault.service.n).toBe(2);
      expect(r.stdout).toContain(`eval ${name} (policy v`);
    }
    const grpo = readMetrics(runDir).filter((m) => m.kind === 'grpo');
    for (const m of grpo) {
      expect(m).toMatchObject({ samples: 2, groups: 1, keptGroups: 1 });
      expect(Object.keys(m.graders as object).length).toBeGreaterThan(0);
      expect(typeof (m.train as Record<string, number>).loss).toBe('number');
      expect(m.rewards).toHaveLength(2);
      expect(m.advantages).toHaveLength(2);
    }
    // Stage 2 rewards diversity: the exploration step's graders include it.
    expect(Object.keys(grpo[2].graders as object)).toContain('diversity');
    expect(recordedProcesses(runDir)).toEqual([]);
    // Bulk data: step files go once a checkpoint covers them (every step here), group files with their step.
    expect(readdirSync(join(runDir, 'data', 'steps'))).toEqual([]);
    expect(readdirSync(join(runDir, 'data', 'groups'))).toEqual([]);
    // The KL reference is the policy at the start of GRPO (after SFT), not the model loaded before SFT.
    const kl = grpo.map((m) => (m.train as Record<string, number>).kl);
    expect(Math.abs(kl[0])).toBeLessThanOrEqual(1e-6);
    expect(kl[1]).toBeGreaterThan(0);
  }, TIMEOUT);

  it('resumed after a SIGKILL in the middle of stage 1, ends with the same updates, rewards, advantages and weights', async () => {
    const runDir = join(scratch, 'killed');
    const run = spawnTrain(configFile, runDir);
    const killedAt = await until('stage-1 step 1', () => {
      const s = stateOf(runDir);
      return s && s.stages.priming.steps >= 1 ? s : undefined;
    });
    run.child.kill('SIGKILL');
    expect((await run.exited).signal).toBe('SIGKILL');
    expect(killedAt.stages.priming.done).toBe(false);
    const left = recordedProcesses(runDir);
    expect(left.map((p) => p.role).sort()).toEqual(['redis', 'rollout-0', 'train']);

    const second = await spawnTrain(configFile, runDir, ['--resume']).exited;
    expect(second.code, second.output).toBe(0);
    expectSameAsUnbroken(runDir);
    // TensorBoard, reading both processes' event files, sees each step once with the kept line's value.
    const tb = readTensorboardScalars(join(runDir, 'tensorboard'));
    readMetrics(runDir).forEach((m, i) => {
      const points = tb[m.kind === 'sft' ? 'sft/train/loss' : `${m.stage}/train/loss`].filter(([step]) => step === i + 1);
      expect(points).toHaveLength(1);
      expect(points[0][1]).toBeCloseTo((m.train as Record<string, number>).loss, 5);
    });
    // The KL reference came back from the checkpoint (taken after the first GRPO step), not from the loaded weights.
    const trainLog = readFileSync(join(runDir, 'logs', 'train.log'), 'utf8');
    expect(trainLog.match(/engine loaded checkpoint .*, KL reference grpo_start/g)).toHaveLength(1);
    expect(trainLog.match(/KL reference: the policy before update/g)).toHaveLength(1);
    // The killed controller's children were stopped by the resumed one, which then stopped its own.
    for (const p of left) expect(alive(p.pid)).toBe(false);
  }, TIMEOUT);

  it('resumed after a SIGKILL in a stage-2 step after grading, ends as the unbroken run', async () => {
    const runDir = join(scratch, 'killed-graded');
    const run = spawnTrain(configFile, runDir);
    const redis = await runRedis(runDir, run);
    // The exploration step's train job exists only once all its groups were graded.
    const job = await until('the stage-2 train job', async () => {
      const j = await activeTrainJob(redis, RUN);
      return j?.stage === 'exploration' ? j : undefined;
    });
    run.child.kill('SIGKILL');
    redis.disconnect();
    expect((await run.exited).signal).toBe('SIGKILL');
    expect(job.kind).toBe('grpo');
    const killedAt = readState(runDir)!;
    expect(killedAt.stages.exploration.steps).toBe(0);
    expect(killedAt.stages.priming.done).toBe(true);

    const second = await spawnTrain(configFile, runDir, ['--resume']).exited;
    expect(second.code, second.output).toBe(0);
    expectSameAsUnbroken(runDir);
  }, TIMEOUT);

  it('says a finished run is complete instead of training again', async () => {
    const r = await spawnTrain(configFile, unbrokenDir(), ['--resume']).exited;
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`already complete (${unbroken.updates} updates)`);
  }, TIMEOUT);
});
