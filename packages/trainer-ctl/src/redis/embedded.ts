/**
 * The run's own redis-server when no Redis URL is given: loopback only, a free port, data in
 * RUN_DIR/redis with the append-only file on, so that restarting in the same run directory
 * (a resumed run) finds the queues and keys as they were. A server that dies while in use is
 * started again on the same port from its append-only file (every acknowledged write is in
 * it: Redis writes the file before it replies), so its clients simply reconnect.
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
  /** Times a server that died is started again before giving up. Default 3. */
  restarts?: number;
  /** Told when the server died and was started again (`restarted`), or could not be (`lost`). */
  onEvent?: (event: EmbeddedRedisEvent) => void;
}

export type EmbeddedRedisEvent = { kind: 'died'; how: string } | { kind: 'restarted'; restarts: number } | { kind: 'lost'; error: Error };

export interface EmbeddedRedis {
  url: string;
  port: number;
  /** Directory holding the append-only files. */
  dir: string;
  /** pid of the running server process. */
  readonly pid: number;
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

function serverArgs(port: number, dir: string): string[] {
  return [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--appendonly',
    'yes',
    '--appendfsync',
    'everysec',
    // The append-only file is the one persistence; no RDB snapshots on top of it.
    '--save',
    '',
    // Every job leaves a few KB of commands in the file (added, started, finished, removed) while
    // the live data stays a few MB: rewriting from 8 MB on keeps the file near the live data
    // instead of growing to Redis's default 64 MB first (docs/scale.md).
    '--auto-aof-rewrite-min-size',
    '8mb',
    '--daemonize',
    'no',
    '--logfile',
    '',
  ];
}

async function launch(executable: string, port: number, dir: string, readyTimeoutS: number): Promise<ChildProcess> {
  // Its own process group: a Ctrl-C in the terminal reaches the controller and the workers, and
  // the controller stops Redis last, once they are done with it. Given the SIGINT too, Redis would
  // go first, under workers still writing, and its supervisor would start it again mid-shutdown.
  const child = spawn(executable, serverArgs(port, dir), { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  child.stderr?.resume();
  await waitReady(child, port, readyTimeoutS);
  child.stdout?.resume();
  return child;
}

/** Starts redis-server for a run and resolves once it accepts connections. */
export async function startEmbeddedRedis(opts: EmbeddedRedisOptions): Promise<EmbeddedRedis> {
  const dir = resolve(join(opts.runDir, 'redis'));
  mkdirSync(dir, { recursive: true });
  const executable = opts.executable ?? 'redis-server';
  const readyTimeoutS = opts.readyTimeoutS ?? 10;
  let lastError: Error | undefined;
  for (let attempt = 0; attempt < PORT_ATTEMPTS; attempt++) {
    const port = await freePort();
    let child: ChildProcess;
    try {
      child = await launch(executable, port, dir, readyTimeoutS);
    } catch (e) {
      lastError = e as Error;
      if (/address already in use/i.test(lastError.message)) continue;
      throw lastError;
    }
    return supervise(child, { ...opts, executable, readyTimeoutS, port, dir });
  }
  throw lastError ?? new Error('redis-server: no free port');
}

function supervise(
  first: ChildProcess,
  o: EmbeddedRedisOptions & { executable: string; readyTimeoutS: number; port: number; dir: string },
): EmbeddedRedis {
  let child = first;
  let stopping = false;
  let restarts = 0;
  let restarting: Promise<void> | undefined;
  const limit = o.restarts ?? 3;
  // A crashed trainer-ctl must not leave its Redis running.
  const killOnExit = () => child.kill('SIGTERM');
  process.once('exit', killOnExit);
  const watch = (c: ChildProcess) =>
    c.once('exit', (code, signal) => {
      if (stopping) return;
      o.onEvent?.({ kind: 'died', how: signal ? `killed by ${signal}` : `exited with code ${code}` });
      restarting = (async () => {
        let lastError: Error | undefined;
        // The same port, so every client's automatic reconnect finds it again.
        while (!stopping && restarts < limit) {
          restarts++;
          try {
            child = await launch(o.executable, o.port, o.dir, o.readyTimeoutS);
          } catch (e) {
            lastError = e as Error;
            continue;
          }
          if (stopping) return stopChild(child);
          watch(child);
          o.onEvent?.({ kind: 'restarted', restarts });
          return;
        }
        if (!stopping)
          o.onEvent?.({ kind: 'lost', error: lastError ?? new Error(`redis-server on port ${o.port} died after ${restarts} restart(s)`) });
      })();
    });
  watch(first);
  return {
    url: `redis://127.0.0.1:${o.port}`,
    port: o.port,
    dir: o.dir,
    get pid() {
      return child.pid!;
    },
    async stop() {
      stopping = true;
      process.removeListener('exit', killOnExit);
      await restarting;
      await stopChild(child);
    },
  };
}
