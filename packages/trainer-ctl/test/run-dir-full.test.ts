/**
 * A full disk and a read-only run directory (issue 23, build item 4), on a real tmpfs that holds
 * the run directory only (the tiny model, the dataset and the configs stay off it):
 * - writeAtomically on a full tmpfs and under a read-only mount: a DiskError naming the
 *   directory and the free space, no temporary directory left, the directory it would replace
 *   untouched; a rollout worker that cannot write a trajectory file fails the job without
 *   retrying and gives up; the engine's ways of saying so are recognised;
 * - a run whose tmpfs fills up during a GRPO update stops at once (the train job is not retried)
 *   with one line naming the path and the free space; the checkpoint before is intact and no
 *   temporary directory is left; with the filler deleted, --resume goes on until the run
 *   directory turns read-only and stops the same way; made writable again, --resume finishes
 *   the run with every step.
 * Read-only is a read-only bind mount over the run directory: the tmpfs itself cannot be
 * remounted read-only while Redis and the logs hold files open for writing ("mount point is
 * busy"), and the bind mount, like a read-only remount, refuses every new write.
 * Mounting needs root (CAP_SYS_ADMIN); without it these tests fail saying so.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EpisodeRecord } from '@thinkfl/env';
import { DiskError, diskProblem, freeBytes } from '../src/disk-errors';
import { connectRedis, parseQueueSettings, RolloutQueue, rolloutJobId } from '../src/queue/index';
import { startRolloutWorker, type RolloutPlayer } from '../src/workers/index';
import { latestCheckpoint, writeAtomically } from '../src/workers/run-files';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { startRedis } from '../../../testkit/redis';
import {
  activeTrainJob,
  expectedKeys,
  runRedis,
  spawnTrain,
  stateOf,
  stepKeys,
  tinyRunYaml,
  until,
  type TrainProcess,
} from './train-fixtures';
import { plainTrajectory } from './workers-fixtures';

const TIMEOUT = 600_000;
/** The run directory's file system: a whole tiny run takes about 34 MB. */
const RUN_FS = '64m';
/** Free space left beside the filler: room for state, metrics, step files and Redis's log, not for a policy export (about 4 MB). */
const MARGIN = 1 << 20;

let scratch: string;
let mnt: string;
const mounted: string[] = [];
const opened: Redis[] = [];

function mount(args: string[], target: string): void {
  try {
    execFileSync('mount', [...args, target], { stdio: 'pipe' });
  } catch (e) {
    const why = ((e as { stderr?: Buffer }).stderr?.toString() ?? (e as Error).message).trim();
    throw new Error(
      `run-dir-full.test.ts needs to mount file systems (root with CAP_SYS_ADMIN): mount ${args.join(' ')} ${target} failed: ${why}`,
    );
  }
  if (!args.some((a) => a.startsWith('remount'))) mounted.push(target);
}

function unmount(target: string): void {
  execFileSync('umount', [target]);
  mounted.splice(mounted.lastIndexOf(target), 1);
}

const tmpfs = (dir: string, size: string) => {
  mkdirSync(dir, { recursive: true });
  mount(['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs'], dir);
};

/** Makes `dir` read-only for every new write (a bind mount of itself, remounted read-only). */
function readOnly(dir: string): void {
  mount(['--bind', dir], dir);
  mount(['-o', 'remount,bind,ro'], dir);
}

/** Takes all but `leave` bytes of the file system holding `dir`. */
function fill(dir: string, leave: number): string {
  const filler = join(dir, 'filler');
  const take = Math.floor((freeBytes(dir)! - leave) / 4096) * 4096;
  execFileSync('fallocate', ['-l', String(take), filler]);
  return filler;
}

/** sha256 of every file under `dir` (relative path -> digest). */
function digests(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out[relative(dir, p)] = createHash('sha256').update(readFileSync(p)).digest('hex');
    }
  };
  walk(dir);
  return out;
}

/** Leftovers of interrupted atomic writes anywhere under `dir`. */
function temporaries(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((p) => /\.tmp-\d+/.test(p));
}

/** The output's lines that report the disk problem; the test wants exactly one. */
const diskLines = (output: string) =>
  output.split('\n').filter((l) => /no space left on device|read-only file system|disk quota exceeded/i.test(l));

beforeAll(async () => {
  await ensureNezhaDataset();
  scratch = mkdtempSync(join(tmpdir(), 'run-dir-full-'));
  mnt = join(scratch, 'mnt');
  tmpfs(mnt, RUN_FS);
});

afterAll(() => {
  for (const r of opened) r.disconnect();
  // Innermost first; lazily, so that a process a failed test left behind cannot keep them.
  for (const m of [...mounted].reverse()) execFileSync('umount', ['-l', m]);
  rmSync(scratch, { recursive: true, force: true });
});

describe('writes of the run directory on a full or read-only file system', () => {
  it('names the directory and the free space, removes its temporary directory, leaves the old directory as it was', async () => {
    const small = join(scratch, 'small');
    tmpfs(small, '256k');
    const dir = join(small, 'v1');
    mkdirSync(dir);
    writeFileSync(join(dir, 'weights'), 'old');
    const big = (tmp: string) => {
      mkdirSync(tmp);
      writeFileSync(join(tmp, 'weights'), Buffer.alloc(1 << 20));
      return Promise.resolve();
    };

    const full = await writeAtomically(dir, big).catch((e: unknown) => e);
    expect(full).toBeInstanceOf(DiskError);
    expect((full as DiskError).message).toMatch(
      new RegExp(`^no space left on device writing ${dir} \\(\\d+(\\.\\d)? kB free on that file system\\)$`),
    );
    // The space the failed write took is given back.
    expect((full as DiskError).free).toBeGreaterThan(200_000);
    expect(readdirSync(small)).toEqual(['v1']);
    expect(readFileSync(join(dir, 'weights'), 'utf8')).toBe('old');

    readOnly(small);
    const ro = await writeAtomically(dir, big).catch((e: unknown) => e);
    expect((ro as DiskError).message).toMatch(new RegExp(`^read-only file system writing ${dir} \\(.* free on that file system\\)$`));
    expect(readFileSync(join(dir, 'weights'), 'utf8')).toBe('old');
    unmount(small);
    unmount(small);
  });

  it('a rollout worker whose trajectory file cannot be written fails the job at once and gives up (onFatal)', async () => {
    const data = join(scratch, 'data');
    mkdirSync(data);
    readOnly(data);
    const server = await startRedis();
    const conn = connectRedis(server.url);
    const settings = parseQueueSettings({ attempts: 3, backoffMs: 10 });
    const fatal: Error[] = [];
    const play: RolloutPlayer = async (j) => {
      const ids = Array.from({ length: 300 }, (_, i) => i % 50);
      return plainTrajectory(j, ids, {} as EpisodeRecord, 1);
    };
    const worker = await startRolloutWorker({
      connection: conn,
      runId: 'ro',
      workerId: 'w',
      settings,
      concurrency: 1,
      play,
      files: { dataDir: data },
      onFatal: (e) => fatal.push(e),
    });
    const queue = new RolloutQueue(conn, 'ro', settings);
    try {
      await queue.enqueueGroup([
        {
          run_id: 'ro',
          stage: 'priming',
          step: 0,
          group_id: 'g',
          case_id: 'c',
          sample_index: 0,
          policy_version: 0,
          temperature: 1,
          seed: 0,
        },
      ]);
      const job = (await queue.queue.getJob(rolloutJobId('g', 0)))!;
      await until('the rollout job to fail', async () => (await job.isFailed()) || undefined, 30_000);
      expect((await queue.queue.getJob(job.id!))!.attemptsMade).toBe(1);
      expect(fatal).toHaveLength(1);
      expect(fatal[0].message).toMatch(
        new RegExp(`^read-only file system writing ${data}/groups/\\S+\\.safetensors \\(.* free on that file system\\)$`),
      );
    } finally {
      await Promise.all([worker.close(), queue.close()]);
      conn.disconnect();
      await server.stop();
      unmount(data);
    }
  });

  it('recognises the engine replies that report a full or read-only disk', () => {
    expect(
      diskProblem(new Error('export: SafetensorError: Error while serializing: I/O error: No space left on device (os error 28)')),
    ).toBe('ENOSPC');
    expect(diskProblem(new Error('save: OSError: [Errno 28] No space left on device'))).toBe('ENOSPC');
    expect(diskProblem(new Error("export: OSError: [Errno 30] Read-only file system: '/r/policies/v3.tmp-1'"))).toBe('EROFS');
    expect(diskProblem(new Error('save: OSError: [Errno 122] Disk quota exceeded'))).toBe('EDQUOT');
    expect(diskProblem(new Error('grpo_step: FloatingPointError: non-finite loss nan; step skipped'))).toBeUndefined();
  });
});

describe('trainer-ctl train on a full or read-only run directory', () => {
  it(
    'stops with one line naming the path and the free space, keeps the last checkpoint; --resume after each fix finishes',
    async () => {
      const name = 'full';
      const file = join(scratch, `${name}.yaml`);
      writeFileSync(file, tinyRunYaml(scratch, name));
      const runDir = join(mnt, 'run');
      const t0 = Date.now();

      /** Runs until `atJob` says a train job is the moment, does `fault`, and checks how the run stops. */
      const stopped = async (run: TrainProcess, atJob: (update: number) => boolean, fault: () => void, problem: RegExp, fix: string) => {
        const redis = await runRedis(runDir, run);
        opened.push(redis);
        const job = await until('the train job to fault in', async () => {
          const j = await activeTrainJob(redis, name);
          return j?.kind === 'grpo' && atJob(j.update) ? j : undefined;
        });
        fault();
        const faulted = Date.now();
        // The update running now cannot write its policy: the checkpoint it started from is the last.
        const last = latestCheckpoint(runDir)!;
        const before = digests(last.dir);
        const exit = await run.exited;
        const stopMs = Date.now() - faulted;
        expect(exit.code, exit.output).toBe(1);
        const lines = diskLines(exit.output);
        expect(lines, exit.output).toHaveLength(1);
        const m = new RegExp(
          `${problem.source} writing (\\S+) \\((\\S+ \\S+) free on that file system\\); ${fix}, then continue it with: trainer-ctl train \\S+ --run-dir ${runDir} --resume$`,
        ).exec(lines[0]);
        expect(m, lines[0]).not.toBeNull();
        expect(m![1].startsWith(`${runDir}/`), m![1]).toBe(true);
        // Failed for good at the first attempt: a disk problem is not retried.
        expect(lines[0]).toMatch(/failed after 1 attempt\(s\)/);
        expect(latestCheckpoint(runDir)).toEqual(last);
        expect(digests(last.dir)).toEqual(before);
        expect(temporaries(runDir)).toEqual([]);
        console.log(`${problem.source} during update ${job.update}: the run exited ${stopMs} ms later with: ${lines[0]}`);
        return job.update;
      };

      let filler = '';
      const failedAt = await stopped(
        spawnTrain(file, runDir),
        // The second GRPO update: the latest checkpoint is a mid-stage one, not a stage end.
        () => stateOf(runDir)!.stages.priming.steps >= 1,
        () => (filler = fill(mnt, MARGIN)),
        /no space left on device/,
        'free space on that file system',
      );
      rmSync(filler);

      await stopped(
        spawnTrain(file, runDir, ['--resume']),
        (u) => u > failedAt,
        () => readOnly(runDir),
        /read-only file system/,
        'make it writable',
      );
      unmount(runDir);

      const last = await spawnTrain(file, runDir, ['--resume']).exited;
      expect(last.code, last.output).toBe(0);
      const keys = expectedKeys(runDir);
      expect(stateOf(runDir)).toMatchObject({ done: true, updates: keys.length });
      expect(stepKeys(runDir)).toEqual(keys);
      console.log(
        `full disk, read-only run directory, three starts: the run finished ${((Date.now() - t0) / 1000).toFixed(0)} s after the first`,
      );
    },
    TIMEOUT,
  );
});
