/**
 * A real redis-server on a free loopback port for a test file, in a temporary run directory:
 * the same launcher trainer-ctl uses for its embedded Redis. No mock of Redis anywhere.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { startEmbeddedRedis } from '../packages/trainer-ctl/src/redis/embedded';

export interface TestRedis {
  url: string;
  port: number;
  stop(): Promise<void>;
}

export async function startRedis(): Promise<TestRedis> {
  const runDir = mkdtempSync(join(tmpdir(), 'thinkfl-redis-'));
  const redis = await startEmbeddedRedis({ runDir });
  return {
    url: redis.url,
    port: redis.port,
    async stop() {
      await redis.stop();
      rmSync(runDir, { recursive: true, force: true });
    },
  };
}

/**
 * A test Redis that wants passwords: `defaultPassword` for the default user, and an ACL user
 * `alice` (every key, channel and command) with `alicePassword`. stop() lifts the default
 * password first: the server's shutdown wants it too.
 */
export async function startRedisWithPasswords(defaultPassword: string, alicePassword: string): Promise<TestRedis> {
  const redis = await startRedis();
  const admin = new Redis(redis.url);
  await admin.acl('SETUSER', 'alice', 'on', `>${alicePassword}`, '~*', '&*', '+@all');
  await admin.config('SET', 'requirepass', defaultPassword);
  admin.disconnect();
  return {
    ...redis,
    async stop() {
      const admin = new Redis(redis.url, { password: defaultPassword });
      await admin.config('SET', 'requirepass', '');
      admin.disconnect();
      await redis.stop();
    },
  };
}
