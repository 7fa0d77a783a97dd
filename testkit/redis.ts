/**
 * A real redis-server on a free loopback port for a test file, in a temporary run directory:
 * the same launcher trainer-ctl uses for its embedded Redis. No mock of Redis anywhere.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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
