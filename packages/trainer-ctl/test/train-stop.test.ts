/**
 * Stops and failures of `trainer-ctl train`, on the real thing (tiny model, real Nezha cases,
 * embedded redis-server, worker child processes, the Python engine):
 * - SIGINT in the middle of an SFT job, then of a GRPO step: every process of the run is gone
 *   within 10 s (the bound the issue sets), nothing unhandled is printed, the one message names
 *   --resume, and --resume finishes the run with the updates of an unbroken one;
 * - the embedded redis-server SIGKILLed during a GRPO step and the engine SIGKILLed during
 *   another: the controller starts Redis again from its append-only file, the train worker
 *   starts its engine again and retries the job, and the run finishes with every update;
 * - with workers.train.engine_restarts 0 the engine's death stops the run with a message
 *   naming --resume, and --resume runs the failed update again and finishes.
 */
import { readFileSync, mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readState } from '../src/controller/index';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import {
  activeRolloutJob,
  activeTrainJob,
  alive,
  descendants,
  enginePid,
  expectedKeys,
  recordedProcesses,
  runRedis,
  spawnTrain,
  stepKeys,
  tinyRunYaml,
  unhandledErrors,
  until,
  type TrainProcess,
} from './train-fixtures';

let scratch: string;
const TIMEOUT = 900_000;
/** SFT of 2 updates of 3 optimizer steps each: long enough to be caught in the middle. */
const SFT = '{ conversations: 6, epochs: 1, batch_size: 1, steps_per_update: 3, optimizer: { lr: 1.0e-3 } }';
const opened: Redis[] = [];

beforeAll(async () => {
  await ensureNezhaDataset();
  scratch = mkdtempSync(join(tmpdir(), 'h11-stop-'));
});

afterAll(() => {
  for (const r of opened) r.disconnect();
  rmSync(scratch, { recursive: true, force: true });
});

function config(name: string, train?: string): string {
  const file = join(scratch, `${name}.yaml`);
  writeFileSync(file, tinyRunYaml(scratch, name, { sft: SFT, train }));
  return file;
}

async function redisOf(runDir: string, run: TrainProcess): Promise<Redis> {
  const r = await runRedis(runDir, run);
  opened.push(r);
  return r;
}

/** Everything the run's logs and output say, for the check that nothing went unhandled. */
function allOutput(runDir: string, output: string): string {
  const logs = ['train', 'rollout-0'].map((n) => join(runDir, 'logs', `${n}.log`)).filter(existsSync);
  return [output, ...logs.map((f) => readFileSync(f, 'utf8'))].join('\n');
}

/** SIGINT to the controller; resolves with the ms until it and every process it started are gone. */
async function interrupt(run: TrainProcess, runDir: string): Promise<{ ms: number; exit: Awaited<TrainProcess['exited']> }> {
  const tree = [run.child.pid!, ...descendants(run.child.pid!), ...recordedProcesses(runDir).map((p) => p.pid)];
  expect(tree.length).toBeGreaterThanOrEqual(5); // controller, redis, train worker, its engine, a rollout worker
  const t0 = Date.now();
  run.child.kill('SIGINT');
  const exit = await run.exited;
  await until('every process of the run to be gone', () => tree.every((p) => !alive(p)), 30_000);
  return { ms: Date.now() - t0, exit };
}

describe('trainer-ctl train, stopped', () => {
  it('SIGINT in an SFT job and in a GRPO step: the tree is gone within 10 s, nothing unhandled; --resume finishes', async () => {
    const file = config('sigint');
    const runDir = join(scratch, 'sigint');

    const first = spawnTrain(file, runDir);
    const redis = await redisOf(runDir, first);
    await until('an SFT job running', async () => (await activeTrainJob(redis, 'sigint'))?.kind === 'sft');
    expect(enginePid(runDir)).toBeDefined();
    const a = await interrupt(first, runDir);
    expect(a.exit.code, a.exit.output).toBe(130);
    console.log(`SIGINT in an SFT job: exited ${a.exit.code}, every process gone after ${a.ms} ms`);
    expect(a.ms).toBeLessThanOrEqual(10_000);
    expect(a.exit.output).toMatch(/stopped by SIGINT; continue it with: trainer-ctl train .* --run-dir .* --resume/);
    expect(unhandledErrors(allOutput(runDir, a.exit.output))).toEqual([]);
    expect(recordedProcesses(runDir)).toEqual([]);
    expect(readState(runDir)!.sft.done).toBe(false);

    const second = spawnTrain(file, runDir, ['--resume']);
    const redis2 = await redisOf(runDir, second);
    await until('a GRPO train job running', async () => (await activeTrainJob(redis2, 'sigint'))?.kind === 'grpo');
    const b = await interrupt(second, runDir);
    expect(b.exit.code, b.exit.output).toBe(130);
    console.log(`SIGINT in a GRPO step: exited ${b.exit.code}, every process gone after ${b.ms} ms`);
    expect(b.ms).toBeLessThanOrEqual(10_000);
    expect(b.exit.output).toMatch(/--resume/);
    expect(unhandledErrors(allOutput(runDir, b.exit.output))).toEqual([]);
    expect(readState(runDir)!.stages.refinement.done).toBe(false);

    const third = await spawnTrain(file, runDir, ['--resume']).exited;
    expect(third.code, third.output).toBe(0);
    const keys = expectedKeys(runDir, 1, 3);
    expect(readState(runDir)!).toMatchObject({ done: true, updates: keys.length });
    expect(stepKeys(runDir)).toEqual(keys);
  }, TIMEOUT);

  it('Redis killed in one GRPO step and the engine in another: both come back and the run finishes with every update', async () => {
    const file = config('crash');
    const runDir = join(scratch, 'crash');
    const run = spawnTrain(file, runDir);
    const redis = await redisOf(runDir, run);
    await until('a stage-1 GRPO rollout running', async () => (await activeRolloutJob(redis, 'crash'))?.stage === 'priming');
    const server = recordedProcesses(runDir).find((p) => p.role === 'redis')!;
    process.kill(server.pid, 'SIGKILL');
    await until('redis-server started again', () => recordedProcesses(runDir).some((p) => p.role === 'redis' && p.pid !== server.pid));
    await until('the stage-2 train job running', async () => (await activeTrainJob(redis, 'crash'))?.stage === 'exploration');
    const engine = enginePid(runDir)!;
    process.kill(engine, 'SIGKILL');

    const exit = await run.exited;
    expect(exit.code, exit.output).toBe(0);
    expect(exit.output).toMatch(/redis-server killed by SIGKILL; starting it again from its append-only file/);
    expect(exit.output).toMatch(/redis-server is back \(restart 1\)/);
    const trainLog = readFileSync(join(runDir, 'logs', 'train.log'), 'utf8');
    expect(trainLog).toMatch(/engine died during update \d+ .*restarting it from the latest checkpoint \(1 of 2\)/);
    expect(unhandledErrors(allOutput(runDir, exit.output))).toEqual([]);
    const keys = expectedKeys(runDir, 1, 3);
    expect(readState(runDir)!).toMatchObject({ done: true, updates: keys.length });
    expect(stepKeys(runDir)).toEqual(keys);
    expect(recordedProcesses(runDir)).toEqual([]);
  }, TIMEOUT);

  it('engine_restarts 0: the engine killed in a GRPO step stops the run with a message naming --resume; --resume finishes', async () => {
    const file = config('no-restart', '{ engine_restarts: 0 }');
    const runDir = join(scratch, 'no-restart');
    const run = spawnTrain(file, runDir);
    const redis = await redisOf(runDir, run);
    const job = await until('a GRPO train job running', async () => {
      const j = await activeTrainJob(redis, 'no-restart');
      return j?.kind === 'grpo' ? j : undefined;
    });
    process.kill(enginePid(runDir)!, 'SIGKILL');
    const exit = await run.exited;
    expect(exit.code).toBe(1);
    expect(exit.output).toMatch(/run stopped: .*train engine died \(workers\.train\.engine_restarts 0\).*; continue it with: trainer-ctl train .* --resume/s);
    expect(recordedProcesses(runDir)).toEqual([]);

    const resumed = await spawnTrain(file, runDir, ['--resume']).exited;
    expect(resumed.code, resumed.output).toBe(0);
    const keys = expectedKeys(runDir, 1, 3);
    expect(readState(runDir)!).toMatchObject({ done: true, updates: keys.length });
    expect(stepKeys(runDir)).toEqual(keys);
    // The failed update ran again: its metrics line is there, with a loss.
    const line = JSON.parse(readFileSync(join(runDir, 'metrics.jsonl'), 'utf8').split('\n')[job.update]);
    expect(typeof line.train.loss).toBe('number');
  }, TIMEOUT);
});
