/**
 * `trainer-ctl worker` against a Redis that refuses it or is not there (issue 15): a refused
 * password ends the worker at once with one line naming the authentication failure (never
 * the password); a worker still waiting for an unreachable Redis logs each attempt without a
 * stack trace and stops on SIGINT and on SIGTERM, as does one whose Redis goes away while it
 * runs; a Redis ACL user with its password from REDIS_PASSWORD connects.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import type { LoadedRunConfig } from '../src/config/index';
import { REPO_ROOT } from '../../../testkit/nezha';
import { startRedis, type TestRedis } from '../../../testkit/redis';
import { createTinyModel, scratch, spawnWorker, writeRunConfig } from './workers-fixtures';
import { freePort } from '../../../testkit/ports';

const PASSWORD = 'default-pw-7f3a9c';
const ALICE_PASSWORD = 'alice-pw-51d2e8';
let redis: TestRedis;
let dir: string | undefined;
let loaded: LoadedRunConfig;

beforeAll(async () => {
  redis = await startRedis();
  const admin = new Redis(redis.url);
  await admin.acl('SETUSER', 'alice', 'on', `>${ALICE_PASSWORD}`, '~*', '&*', '+@all');
  await admin.config('SET', 'requirepass', PASSWORD);
  admin.disconnect();
  dir = scratch('redis-auth');
  loaded = writeRunConfig(dir, 'auth-test', await createTinyModel(join(dir, 'model'), 4));
}, 300_000);
afterAll(async () => {
  // The test Redis now wants a password for its shutdown too.
  const admin = new Redis(redis.url, { password: PASSWORD });
  await admin.config('SET', 'requirepass', '');
  admin.disconnect();
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const hostPort = () => redis.url.replace(/^redis:\/\//, '');

describe('a worker whose Redis refuses it', () => {
  it.each([
    ['a wrong password in the URL', 'rollout', `redis://:wrong-${PASSWORD}@`, {}],
    ['a wrong REDIS_PASSWORD', 'train', 'redis://', { REDIS_PASSWORD: `wrong-${PASSWORD}` }],
    ['no password at all', 'rollout', 'redis://', {}],
    ['a wrong password for an ACL user', 'train', 'redis://alice@', { REDIS_PASSWORD: PASSWORD }],
  ] as const)('%s: exits 1 within 5 s with one line naming the failure', async (_what, kind, prefix, env) => {
    const started = Date.now();
    const w = spawnWorker([kind, '--config', loaded.file, '--redis', `${prefix}${hostPort()}`], env);
    const exit = await w.exited;
    const seconds = (Date.now() - started) / 1000;
    expect(exit).toEqual({ code: 1, signal: null });
    expect(seconds).toBeLessThan(5);
    expect(w.lines.filter((l) => l.trim())).toHaveLength(1);
    expect(w.lines[0]).toMatch(/fatal: Redis redis:\/\/.*127\.0\.0\.1:\d+: authentication failed \((WRONGPASS|NOAUTH)\b/);
    expect(w.lines[0]).not.toContain(PASSWORD);
  }, 30_000);
});

describe('trainer-ctl train whose Redis refuses it', () => {
  it('fails with one line naming the authentication failure, never printing the password', () => {
    const wrong = `wrong-${PASSWORD}`;
    const r = spawnSync(process.execPath, [join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs'), 'train', loaded.file, '--run-dir', join(dir!, 'refused')], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
      env: { ...process.env, THINKFL_REDIS_URL: `redis://:${wrong}@${hostPort()}` },
      timeout: 120_000,
    });
    expect(r.status).not.toBe(0);
    expect(r.stdout + r.stderr).not.toContain(wrong);
    expect(r.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^trainer-ctl: Redis redis:\/\/:\*\*\*@127\.0\.0\.1:\d+: authentication failed \(WRONGPASS/)]);
  }, 180_000);
});

describe('a worker whose Redis is down', () => {
  it.each(['SIGINT', 'SIGTERM'] as const)('logs each attempt in one line and stops within 10 s of %s', async (sig) => {
    const port = await freePort();
    const w = spawnWorker(['rollout', '--config', loaded.file, '--redis', `redis://127.0.0.1:${port}`]);
    // Several attempts: the backoff is running when the signal comes.
    await w.waitLine(/attempt 4 in \d+ ms/, 30_000);
    const sent = Date.now();
    w.child.kill(sig);
    const exit = await w.exited;
    expect((Date.now() - sent) / 1000).toBeLessThan(10);
    expect(exit).toEqual({ code: 0, signal: null });
    const attempts = w.lines.filter((l) => l.includes('unreachable'));
    expect(attempts.length).toBeGreaterThanOrEqual(3);
    for (const l of attempts) expect(l).toMatch(new RegExp(`Redis redis://127\\.0\\.0\\.1:${port} unreachable \\(connect ECONNREFUSED [^)]*\\); attempt \\d+ in \\d+ ms$`));
    // Every line is the worker's own: no stack frames, no ioredis "Unhandled error event".
    for (const l of w.lines.filter((x) => x.trim())) expect(l).toMatch(/^\[worker rollout \d+\] /);
    expect(w.lines.at(-1)).toMatch(new RegExp(`${sig}: stopped before the worker was ready`));
  }, 60_000);

  it('waits with a growing delay between attempts', async () => {
    const port = await freePort();
    const w = spawnWorker(['rollout', '--config', loaded.file, '--redis', `redis://127.0.0.1:${port}`]);
    await w.waitLine(/attempt 5 in/, 30_000);
    w.child.kill('SIGTERM');
    await w.exited;
    const delays = w.lines.flatMap((l) => /attempt (\d+) in (\d+) ms/.exec(l) ?? []).filter((_, i) => i % 3 === 2).map(Number);
    expect(delays.slice(0, 4)).toEqual([100, 200, 400, 800]);
  }, 60_000);
});

describe('a worker whose Redis goes away while it runs', () => {
  it.each(['rollout', 'train'] as const)('%s: stops within 10 s of SIGTERM', async (kind) => {
    const own = await startRedis();
    try {
      const w = spawnWorker([kind, '--config', loaded.file, '--redis', own.url, '--id', `${kind}-orphan`]);
      await w.waitLine(new RegExp(`${kind}-orphan ready on `), 180_000);
      await own.stop();
      await w.waitLine(/unreachable/, 30_000);
      const sent = Date.now();
      w.child.kill('SIGTERM');
      const exit = await w.exited;
      expect((Date.now() - sent) / 1000).toBeLessThan(10);
      expect(exit.signal).toBeNull();
      expect(w.lines.join('\n')).not.toMatch(/Unhandled error event|\n\s+at |worker error/);
      // One line per attempt, although BullMQ holds more connections to the same Redis.
      const attempts = w.lines.flatMap((l) => /unreachable \(.*\); attempt (\d+) in/.exec(l)?.[1] ?? []).map(Number);
      expect(attempts.length).toBeGreaterThan(0);
      expect(attempts).toEqual(attempts.map((_, i) => attempts[0] + i));
    } finally {
      await own.stop().catch(() => undefined);
    }
  }, 240_000);
});

describe('a Redis ACL user', () => {
  it('connects with its password from REDIS_PASSWORD, which no log line shows', async () => {
    const w = spawnWorker(['rollout', '--config', loaded.file, '--redis', `redis://alice@${hostPort()}`, '--id', 'alice-worker'], { REDIS_PASSWORD: ALICE_PASSWORD });
    await w.waitLine(/alice-worker ready on redis:\/\/alice:\*\*\*@127\.0\.0\.1:\d+ /, 180_000);
    w.child.kill('SIGTERM');
    expect(await w.exited).toEqual({ code: 0, signal: null });
    expect(w.lines.join('\n')).not.toContain(ALICE_PASSWORD);
  }, 240_000);

  it('serves a train worker that Ctrl-C (SIGINT to its process group) stops, engine included, without a traceback', async () => {
    const w = spawnWorker(['train', '--config', loaded.file, '--redis', `redis://alice@${hostPort()}`, '--id', 'alice-trainer'], { REDIS_PASSWORD: ALICE_PASSWORD }, true);
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
