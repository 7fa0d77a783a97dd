/** A real `trainer-ctl serve` child process over a model directory, and reads of its /metrics. */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT } from '../../../testkit/nezha';

export interface ServeProcess {
  child: ChildProcess;
  /** Base URL of the API, e.g. http://127.0.0.1:PORT/v1. */
  url: string;
  /** Origin, for /metrics. */
  origin: string;
  stop(): Promise<void>;
}

/** `port` 0 picks a free one; a fixed one restarts a replica where its clients expect it. */
export async function startServe(modelDir: string, args: string[] = [], port = 0): Promise<ServeProcess> {
  const child = spawn(
    process.execPath,
    [join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs'), 'serve', '--model', modelDir, '--port', String(port), ...args],
    {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (b: Buffer) => {
      out += b.toString();
      const m = /serving \S+ at (\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.stderr!.on('data', (b: Buffer) => (out += b.toString()));
    child.once('exit', (code) => reject(new Error(`trainer-ctl serve exited with ${code}:\n${out}`)));
  });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  return {
    child,
    url,
    origin: new URL(url).origin,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

/** The server's /metrics values by name. */
export async function readMetrics(origin: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${origin}/metrics`)).text();
  return Object.fromEntries(
    text
      .split('\n')
      .filter((l) => l && !l.startsWith('#'))
      .map((l) => {
        const [k, v] = l.split(' ');
        return [k, Number(v)];
      }),
  );
}
