/**
 * `trainer-ctl train` with workers.train.engine_restarts 0, on the real thing (tiny model, real
 * Nezha cases, embedded redis-server, worker child processes, the Python engine): the engine's
 * death stops the run with a message naming --resume, and --resume runs the failed update again
 * and finishes. (SIGINT, and SIGKILL of each process of a run, are the fault matrix's:
 * fault-matrix.test.ts.)
 */
import { readFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readState } from '../src/run-files/state';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import {
  activeTrainJob,
  enginePid,
  expectedKeys,
  recordedProcesses,
  runRedis,
  spawnTrain,
  stepKeys,
  tinyRunYaml,
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

describe('trainer-ctl train, stopped', () => {
  it(
    'engine_restarts 0: the engine killed in a GRPO step stops the run with a message naming --resume; --resume finishes',
    async () => {
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
      expect(exit.output).toMatch(
        /run stopped: .*train engine died \(workers\.train\.engine_restarts 0\).*; continue it with: trainer-ctl train .* --resume/s,
      );
      expect(recordedProcesses(runDir)).toEqual([]);

      const resumed = await spawnTrain(file, runDir, ['--resume']).exited;
      expect(resumed.code, resumed.output).toBe(0);
      const keys = expectedKeys(runDir, 1, 3);
      expect(readState(runDir)!).toMatchObject({ done: true, updates: keys.length });
      expect(stepKeys(runDir)).toEqual(keys);
      // The failed update ran again: its metrics line is there, with a loss.
      const line = JSON.parse(readFileSync(join(runDir, 'metrics.jsonl'), 'utf8').split('\n')[job.update]);
      expect(typeof line.train.loss).toBe('number');
    },
    TIMEOUT,
  );
});
