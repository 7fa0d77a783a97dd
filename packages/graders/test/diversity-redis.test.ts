import { spawn } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { startRedis, type TestRedis } from '../../../testkit/redis';
import { REPO_ROOT } from '../../../testkit/nezha';
import { pathKey, RedisDiversityCache } from '../src/index';
import { GO_KEY, KEY_PREFIX, PAIRS, READY_KEY } from './fixtures/mark-paths-plan';

let redis: TestRedis;
let client: Redis;

beforeAll(async () => {
  redis = await startRedis();
  client = new Redis(redis.url);
});
afterAll(async () => {
  await client?.quit();
  await redis?.stop();
});

function runWorker(worker: number): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'packages/graders/test/fixtures/mark-paths.ts', redis.url, String(worker)], {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (b) => (out += b));
    child.stderr.on('data', (b) => (err += b));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`worker ${worker} exited ${code}:\n${err}`))));
  });
}

describe('Redis diversity cache', () => {
  it('two processes racing over overlapping paths count each distinct path new exactly once', async () => {
    const done = [runWorker(0), runWorker(1)];
    let failure: unknown;
    for (const d of done) d.catch((e) => (failure ??= e));
    // Release both workers together once both are connected, so their requests interleave.
    while (Number(await client.get(READY_KEY)) < 2) {
      if (failure) throw failure;
      await new Promise((r) => setTimeout(r, 20));
    }
    await client.rpush(GO_KEY, 'go', 'go');
    const [a, b] = await Promise.all(done);

    const counts = new Map<string, number>();
    for (const id of [...a, ...b]) counts.set(id, (counts.get(id) ?? 0) + 1);
    expect(counts.size).toBe(PAIRS.length);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    // Pairs only one worker marked are new for that worker.
    expect(a).toEqual(expect.arrayContaining(PAIRS.slice(0, 300).map((p) => p.id)));
    expect(b).toEqual(expect.arrayContaining(PAIRS.slice(600).map((p) => p.id)));
    // One hash per question, holding its 300 path keys, with the TTL the workers set.
    for (const q of ['case-0', 'case-1', 'case-2']) {
      expect(await client.hlen(KEY_PREFIX + q)).toBe(300);
      const ttl = await client.ttl(KEY_PREFIX + q);
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(3600);
    }
  });

  it('uses a caller-owned connection without closing it, and keeps hashes without TTL by default', async () => {
    const cache = new RedisDiversityCache(client);
    const key = pathKey(PAIRS[5].path);
    expect([
      await cache.markSeen('own', key, 'g#0'),
      await cache.markSeen('own', key, 'g#1'),
      await cache.markSeen('own2', key, 'g#1'),
    ]).toEqual([true, false, true]);
    await cache.close();
    expect(await client.ttl('thinkfl:diversity:own')).toBe(-1);
    expect(await client.hget('thinkfl:diversity:own', key)).toBe('g#0');
  });

  it('answers the first owner the same when it asks again (a replayed group), from a new connection too', async () => {
    const key = pathKey(PAIRS[7].path);
    const first = new RedisDiversityCache(redis.url, { keyPrefix: 'replay:', ttlSeconds: 0 });
    expect([await first.markSeen('q', key, 's-1-0#0'), await first.markSeen('q', key, 's-1-0#1')]).toEqual([true, false]);
    await first.close();
    const again = new RedisDiversityCache(redis.url, { keyPrefix: 'replay:', ttlSeconds: 0 });
    expect([
      await again.markSeen('q', key, 's-1-0#0'),
      await again.markSeen('q', key, 's-1-0#1'),
      await again.markSeen('q', key, 's-2-0#0'),
    ]).toEqual([true, false, false]);
    await again.close();
  });
});
