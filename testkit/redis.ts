/**
 * Starts a real redis-server on a free loopback port for a test file, and stops it after.
 * Tests that need Redis use this; there is no mock of Redis anywhere in the project.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestRedis {
  url: string;
  port: number;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export async function startRedis(): Promise<TestRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'thinkfl-redis-'));
  const child: ChildProcess = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout?.on('data', (b) => (out += b));
  child.stderr?.on('data', (b) => (out += b));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`redis-server did not start on ${port}:\n${out}`)), 10_000);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(new Error(`cannot start redis-server (is it installed?): ${e.message}`));
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`redis-server exited with ${code}:\n${out}`));
    });
    const poll = setInterval(() => {
      if (out.includes('Ready to accept connections')) {
        clearInterval(poll);
        clearTimeout(timer);
        child.removeAllListeners('exit');
        resolve();
      }
    }, 20);
  });
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
