/**
 * The embedded redis-server keeps a run's data across a stop and a restart in the same run
 * directory, and a server that dies (SIGKILL) is started again on its port from its
 * append-only file while a client with the queues' settings waits and then carries on.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { startEmbeddedRedis, type EmbeddedRedisEvent } from '../src/redis/embedded';
import { connectRedis } from '../src/queue/connection';

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

  it('starts a killed server again on the same port from its append-only file; a waiting client carries on', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'thinkfl-run-'));
    const events: EmbeddedRedisEvent[] = [];
    let back!: () => void;
    const restarted = new Promise<void>((r) => (back = r));
    const server = await startEmbeddedRedis({
      runDir: dir,
      onEvent: (e) => {
        events.push(e);
        if (e.kind === 'restarted') back();
      },
    });
    const client = connectRedis(server.url);
    const errors: string[] = [];
    client.on('error', (e: Error) => errors.push(e.message));
    try {
      for (let i = 0; i < 200; i++) await client.rpush('writes', String(i));
      const before = server.pid;
      process.kill(before, 'SIGKILL');
      // Sent while the server is down: queued by the client, answered once it is back.
      const during = client.rpush('writes', 'after');
      await restarted;
      expect(await during).toBe(201);
      expect(server.pid).not.toBe(before);
      expect(await client.lrange('writes', 0, 2)).toEqual(['0', '1', '2']);
      expect(events.map((e) => e.kind)).toEqual(['died', 'restarted']);
      expect(events[0]).toEqual({ kind: 'died', how: 'killed by SIGKILL' });
    } finally {
      client.disconnect();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('reports the server lost when it may not be started again', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'thinkfl-run-'));
    let lost!: (e: EmbeddedRedisEvent) => void;
    const gone = new Promise<EmbeddedRedisEvent>((r) => (lost = r));
    const server = await startEmbeddedRedis({ runDir: dir, restarts: 0, onEvent: (e) => e.kind === 'lost' && lost(e) });
    try {
      process.kill(server.pid, 'SIGKILL');
      const e = await gone;
      expect(e.kind === 'lost' && e.error.message).toMatch(/died after 0 restart/);
      await expect(withClient(server.url, (r) => r.ping())).rejects.toThrow();
    } finally {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('names the problem when redis-server cannot be started', async () => {
    const missing = join(runDir, 'no-such-redis-server');
    await expect(startEmbeddedRedis({ runDir, executable: missing })).rejects.toThrow(/cannot start redis-server/);
    expect(existsSync(missing)).toBe(false);
  });
});
