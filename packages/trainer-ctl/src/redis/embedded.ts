/**
 * The run's own redis-server when no Redis URL is given: loopback only, a free port, data in
 * RUN_DIR/redis with the append-only file on, so that restarting in the same run directory
 * (a resumed run) finds the queues and keys as they were.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';

export interface EmbeddedRedisOptions {
  /** The run directory; Redis keeps its data in <runDir>/redis. */
  runDir: string;
  /** redis-server executable. Default 'redis-server' (from PATH). */
  executable?: string;
  /** Give up when the server is not ready after this long, seconds. Default 10. */
  readyTimeoutS?: number;
}

export interface EmbeddedRedis {
  url: string;
  port: number;
  /** Directory holding the append-only files. */
  dir: string;
  /** Shuts the server down (it flushes the append-only file first) and waits for it to exit. */
  stop(): Promise<void>;
}

/** Attempts before giving up when another process takes the chosen port first. */
const PORT_ATTEMPTS = 5;

async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => res(port));
    });
  });
}

function waitReady(child: ChildProcess, port: number, timeoutS: number): Promise<void> {
  let out = '';
  return new Promise((res, rej) => {
    const done = (err?: Error) => {
      clearTimeout(timer);
      child.stdout?.removeListener('data', onData);
      child.removeListener('exit', onExit);
      child.removeListener('error', onError);
      if (err) rej(err);
      else res();
    };
    const onData = (b: Buffer) => {
      out += b;
      if (out.includes('Ready to accept connections')) done();
    };
    const onExit = (code: number | null) => done(new Error(`redis-server on port ${port} exited with ${code}:\n${out}`));
    const onError = (e: Error) => done(new Error(`cannot start redis-server (is it installed?): ${e.message}`));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      done(new Error(`redis-server on port ${port} not ready after ${timeoutS} s:\n${out}`));
    }, timeoutS * 1000);
    child.stdout?.on('data', onData);
    child.once('exit', onExit);
    child.once('error', onError);
  });
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  // SIGTERM makes redis flush the append-only file and exit; SIGKILL only if it hangs.
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  await exited;
  clearTimeout(timer);
}

/** Starts redis-server for a run and resolves once it accepts connections. */
export async function startEmbeddedRedis(opts: EmbeddedRedisOptions): Promise<EmbeddedRedis> {
  const dir = resolve(join(opts.runDir, 'redis'));
  mkdirSync(dir, { recursive: true });
  let lastError: Error | undefined;
  for (let attempt = 0; attempt < PORT_ATTEMPTS; attempt++) {
    const port = await freePort();
    const args = [
      '--port', String(port),
      '--bind', '127.0.0.1',
      '--dir', dir,
      '--appendonly', 'yes',
      '--appendfsync', 'everysec',
      // The append-only file is the one persistence; no RDB snapshots on top of it.
      '--save', '',
      // Every job leaves a few KB of commands in the file (added, started, finished, removed) while
      // the live data stays a few MB: rewriting from 8 MB on keeps the file near the live data
      // instead of growing to Redis's default 64 MB first (docs/scale.md).
      '--auto-aof-rewrite-min-size', '8mb',
      '--daemonize', 'no',
      '--logfile', '',
    ];
    const child = spawn(opts.executable ?? 'redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stderr?.resume();
    try {
      await waitReady(child, port, opts.readyTimeoutS ?? 10);
    } catch (e) {
      lastError = e as Error;
      if (/address already in use/i.test(lastError.message)) continue;
      throw lastError;
    }
    child.stdout?.resume();
    // A crashed trainer-ctl must not leave its Redis running.
    const killOnExit = () => child.kill('SIGTERM');
    process.once('exit', killOnExit);
    return {
      url: `redis://127.0.0.1:${port}`,
      port,
      dir,
      async stop() {
        process.removeListener('exit', killOnExit);
        await stopChild(child);
      },
    };
  }
  throw lastError ?? new Error('redis-server: no free port');
}
