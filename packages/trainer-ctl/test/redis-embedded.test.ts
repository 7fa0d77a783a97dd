/** The embedded redis-server keeps a run's data across a stop and a restart in the same run directory. */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmbeddedRedis } from '../src/redis';

const runDir = mkdtempSync(join(tmpdir(), 'thinkfl-run-'));
afterAll(() => rmSync(runDir, { recursive: true, force: true }));

async function withClient<T>(url: string, fn: (r: Redis) => Promise<T>): Promise<T> {
  // No reconnect loop: a refused connection must fail the call, which connect() reports.
  const r = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null });
  r.on('error', () => undefined);
  await r.connect();
  try {
    return await fn(r);
  } finally {
    r.disconnect();
  }
}

describe('embedded redis-server', () => {
  it('serves on loopback with the append-only file in RUN_DIR/redis', async () => {
    const redis = await startEmbeddedRedis({ runDir });
    try {
      expect(redis.url).toBe(`redis://127.0.0.1:${redis.port}`);
      expect(redis.dir).toBe(join(runDir, 'redis'));
      const aof = await withClient(redis.url, async (r) => (await r.config('GET', 'appendonly')) as string[]);
      expect(aof).toEqual(['appendonly', 'yes']);
    } finally {
      await redis.stop();
    }
    expect(readdirSync(join(runDir, 'redis')).length).toBeGreaterThan(0);
  });

  it('keeps keys across stop and restart in the same run directory', async () => {
    const first = await startEmbeddedRedis({ runDir });
    await withClient(first.url, async (r) => {
      await r.set('run:step', '42');
      await r.rpush('run:queue', 'a', 'b', 'c');
    });
    await first.stop();
    await expect(withClient(first.url, (r) => r.ping())).rejects.toThrow();

    const second = await startEmbeddedRedis({ runDir });
    try {
      await withClient(second.url, async (r) => {
        expect(await r.get('run:step')).toBe('42');
        expect(await r.lrange('run:queue', 0, -1)).toEqual(['a', 'b', 'c']);
      });
    } finally {
      await second.stop();
    }
  });

  it('starts empty in a fresh run directory', async () => {
    const other = mkdtempSync(join(tmpdir(), 'thinkfl-run-'));
    const redis = await startEmbeddedRedis({ runDir: other });
    try {
      expect(await withClient(redis.url, (r) => r.dbsize())).toBe(0);
    } finally {
      await redis.stop();
      rmSync(other, { recursive: true, force: true });
    }
  });

  it('names the problem when redis-server cannot be started', async () => {
    const missing = join(runDir, 'no-such-redis-server');
    await expect(startEmbeddedRedis({ runDir, executable: missing })).rejects.toThrow(/cannot start redis-server/);
    expect(existsSync(missing)).toBe(false);
  });
});
