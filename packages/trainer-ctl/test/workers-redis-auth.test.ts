/**
 * `trainer-ctl worker` against a Redis that refuses it or is not there (issue 15): a refused
 * password ends the worker at once (no retry) with one line naming the authentication failure
 * (never the password); a worker still waiting for an unreachable Redis logs each attempt without
 * a stack trace and stops on SIGINT and on SIGTERM within the backoff it is in; one whose Redis
 * goes away while it runs stops by itself, at the latest by its stop grace; a Redis ACL user with
 * its password from REDIS_PASSWORD connects.
 * "At once" and "within the backoff" are counted in reconnect attempts, the worker's own clock,
 * not in seconds, which stretch with the machine's load.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadedRunConfig } from '../src/config/index';
import { REPO_ROOT } from '../../../testkit/nezha';
import { startRedis, startRedisWithPasswords, type TestRedis } from '../../../testkit/redis';
import { scratch, spawnWorker, writeRunConfig, type WorkerProcess } from './workers-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';
import { freePort } from '../../../testkit/ports';

const PASSWORD = 'default-pw-7f3a9c';
const ALICE_PASSWORD = 'alice-pw-51d2e8';
let redis: TestRedis;
let dir: string | undefined;
let loaded: LoadedRunConfig;

beforeAll(async () => {
  redis = await startRedisWithPasswords(PASSWORD, ALICE_PASSWORD);
  dir = scratch('redis-auth');
  loaded = writeRunConfig(dir, 'auth-test', await createTinyModel(join(dir, 'model'), 4));
}, 300_000);
afterAll(async () => {
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const hostPort = () => redis.url.replace(/^redis:\/\//, '');

const ATTEMPT = /unreachable \(.*\); attempt (\d+) in \d+ ms$/;
const attemptLines = (lines: string[]) => lines.filter((l) => ATTEMPT.test(l));

/**
 * Sends `sig` once the worker has announced its 7th attempt, 3.2 s away (the delays double from
 * 100 ms), and counts the attempts it announces after the signal. A worker that stops in the
 * backoff it is in announces none, or the one it may have logged before the signal reached it.
 */
async function attemptsAfter(w: WorkerProcess, sig: NodeJS.Signals): Promise<{ exit: Awaited<WorkerProcess['exited']>; after: number }> {
  await w.waitLine(/attempt 7 in \d+ ms/, 60_000);
  const seen = attemptLines(w.lines).length;
  w.child.kill(sig);
  const exit = await w.exited;
  return { exit, after: attemptLines(w.lines).length - seen };
}

describe('a worker whose Redis refuses it', () => {
  it.each([
    ['a wrong password in the URL', 'rollout', `redis://:wrong-${PASSWORD}@`, {}],
    ['a wrong REDIS_PASSWORD', 'train', 'redis://', { REDIS_PASSWORD: `wrong-${PASSWORD}` }],
    ['no password at all', 'rollout', 'redis://', {}],
    ['a wrong password for an ACL user', 'train', 'redis://alice@', { REDIS_PASSWORD: PASSWORD }],
  ] as const)(
    '%s: exits 1 without a retry, with one line naming the failure',
    async (_what, kind, prefix, env) => {
      const w = spawnWorker([kind, '--config', loaded.file, '--redis', `${prefix}${hostPort()}`], env);
      const exit = await w.exited;
      expect(exit).toEqual({ code: 1, signal: null });
      // Each retry would log an attempt line: the one line is the only one.
      expect(w.lines.filter((l) => l.trim())).toHaveLength(1);
      expect(attemptLines(w.lines)).toEqual([]);
      expect(w.lines[0]).toMatch(/fatal: Redis redis:\/\/.*127\.0\.0\.1:\d+: authentication failed \((WRONGPASS|NOAUTH)\b/);
      expect(w.lines[0]).not.toContain(PASSWORD);
    },
    30_000,
  );
});

describe('trainer-ctl train whose Redis refuses it', () => {
  it('fails with one line naming the authentication failure, never printing the password', () => {
    const wrong = `wrong-${PASSWORD}`;
    const r = spawnSync(
      process.execPath,
      [join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs'), 'train', loaded.file, '--run-dir', join(dir!, 'refused')],
      {
        cwd: REPO_ROOT,
        encoding: 'utf8',
        env: { ...process.env, THINKFL_REDIS_URL: `redis://:${wrong}@${hostPort()}` },
        timeout: 120_000,
      },
    );
    expect(r.status).not.toBe(0);
    expect(r.stdout + r.stderr).not.toContain(wrong);
    expect(r.stderr.trim().split('\n')).toEqual([
      expect.stringMatching(/^trainer-ctl: Redis redis:\/\/:\*\*\*@127\.0\.0\.1:\d+: authentication failed \(WRONGPASS/),
    ]);
  }, 180_000);
});

describe('a worker whose Redis is down', () => {
  it.each(['SIGINT', 'SIGTERM'] as const)(
    'logs each attempt in one line and stops on %s within the backoff it is in',
    async (sig) => {
      const port = await freePort();
      const w = spawnWorker(['rollout', '--config', loaded.file, '--redis', `redis://127.0.0.1:${port}`]);
      // Several attempts: the backoff is running when the signal comes.
      const { exit, after } = await attemptsAfter(w, sig);
      // Not yet connected, it stops at once: neither another attempt nor its stop grace (STOP_GRACE_MS).
      expect(after).toBeLessThanOrEqual(1);
      expect(w.lines.join('\n')).not.toMatch(/not closed after \d+ ms/);
      expect(exit).toEqual({ code: 0, signal: null });
      const attempts = w.lines.filter((l) => l.includes('unreachable'));
      expect(attempts.length).toBeGreaterThanOrEqual(3);
      for (const l of attempts)
        expect(l).toMatch(
          new RegExp(`Redis redis://127\\.0\\.0\\.1:${port} unreachable \\(connect ECONNREFUSED [^)]*\\); attempt \\d+ in \\d+ ms$`),
        );
      // Every line is the worker's own: no stack frames, no ioredis "Unhandled error event".
      for (const l of w.lines.filter((x) => x.trim())) expect(l).toMatch(/^\[worker rollout \d+\] /);
      expect(w.lines.at(-1)).toMatch(new RegExp(`${sig}: stopped before the worker was ready`));
    },
    60_000,
  );

  it('waits with a growing delay between attempts', async () => {
    const port = await freePort();
    const w = spawnWorker(['rollout', '--config', loaded.file, '--redis', `redis://127.0.0.1:${port}`]);
    await w.waitLine(/attempt 5 in/, 30_000);
    w.child.kill('SIGTERM');
    await w.exited;
    const delays = w.lines
      .flatMap((l) => /attempt (\d+) in (\d+) ms/.exec(l) ?? [])
      .filter((_, i) => i % 3 === 2)
      .map(Number);
    expect(delays.slice(0, 4)).toEqual([100, 200, 400, 800]);
  }, 60_000);
});

describe('a worker whose Redis goes away while it runs', () => {
  it.each(['rollout', 'train'] as const)(
    '%s: stops by itself on SIGTERM, within its stop grace',
    async (kind) => {
      const own = await startRedis();
      try {
        const w = spawnWorker([kind, '--config', loaded.file, '--redis', own.url, '--id', `${kind}-orphan`]);
        await w.waitLine(new RegExp(`${kind}-orphan ready on `), 180_000);
        await own.stop();
        const { exit } = await attemptsAfter(w, 'SIGTERM');
        // Its close needs the Redis that is gone: the stop grace (STOP_GRACE_MS, a timer of the
        // worker's own, not the test's clock) ends it if the close does not, and it exits by itself.
        expect(exit.signal).toBeNull();
        expect(w.lines.filter((l) => l.trim()).at(-1)).toMatch(/: stopped$|SIGTERM: not closed after \d+ ms; exiting$/);
        expect(w.lines.join('\n')).not.toMatch(/Unhandled error event|\n\s+at |worker error/);
        // One line per attempt, although BullMQ holds more connections to the same Redis.
        const attempts = w.lines.flatMap((l) => /unreachable \(.*\); attempt (\d+) in/.exec(l)?.[1] ?? []).map(Number);
        expect(attempts.length).toBeGreaterThan(0);
        expect(attempts).toEqual(attempts.map((_, i) => attempts[0] + i));
      } finally {
        await own.stop().catch(() => undefined);
      }
    },
    240_000,
  );
});

describe('a Redis ACL user', () => {
  it('connects with its password from REDIS_PASSWORD, which no log line shows', async () => {
    const w = spawnWorker(['rollout', '--config', loaded.file, '--redis', `redis://alice@${hostPort()}`, '--id', 'alice-worker'], {
      REDIS_PASSWORD: ALICE_PASSWORD,
    });
    await w.waitLine(/alice-worker ready on redis:\/\/alice:\*\*\*@127\.0\.0\.1:\d+ /, 180_000);
    w.child.kill('SIGTERM');
    expect(await w.exited).toEqual({ code: 0, signal: null });
    expect(w.lines.join('\n')).not.toContain(ALICE_PASSWORD);
  }, 240_000);

  it('serves a train worker that Ctrl-C (SIGINT to its process group) stops, engine included, without a traceback', async () => {
    const w = spawnWorker(
      ['train', '--config', loaded.file, '--redis', `redis://alice@${hostPort()}`, '--id', 'alice-trainer'],
      { REDIS_PASSWORD: ALICE_PASSWORD },
      true,
    );
    await w.waitLine(/alice-trainer ready on /, 180_000);
    process.kill(-w.child.pid!, 'SIGINT');
    expect(await w.exited).toEqual({ code: 0, signal: null });
    const text = w.lines.join('\n');
    expect(text).toMatch(/SIGINT: closing/);
    expect(text).toMatch(/\[engine\] INFO exiting/);
    expect(text).not.toMatch(/Traceback|KeyboardInterrupt/);
    expect(text).not.toContain(ALICE_PASSWORD);
  }, 240_000);
});
