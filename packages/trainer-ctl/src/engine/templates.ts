/**
 * Engine templates (engine/thinkfl_engine/template.py): a Python process per engine environment
 * that has imported the engine once and forks each engine from it, so that an engine after the
 * first starts in about 0.2 s of CPU instead of 5.5 s (docs/experiments.md, "The CI run's length" 6).
 * The driver spawns `shim.py` in the engine's place, which asks the template for the fork; the
 * driver's process, pipes, exit status and kill are the shim's, as they were the engine's.
 *
 * A template is a child of this process and exits when this process does (its stdin closes),
 * after its engines. Templates fork only single-process engines on a machine without an NVIDIA
 * device: a CUDA context does not survive fork.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable, Writable } from 'node:stream';

/** How an engine process starts: forked from a template, or as a fresh Python process. */
export type EngineLaunch = 'auto' | 'spawn' | 'fork';

interface Template {
  child: ChildProcess;
  socket: string;
}

/** The templates of one process, keyed by interpreter, engine directory and environment; the least recently used beyond `max` is closed. */
export class EngineTemplates {
  private readonly live = new Map<string, Template>();

  constructor(private readonly max = 2) {}

  /** The template for engines started with exactly this interpreter, engine directory and environment. */
  get(python: string, engineDir: string, env: NodeJS.ProcessEnv): { socket: string; pid: number } {
    const key = JSON.stringify([python, engineDir, Object.entries(env).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))]);
    let t = this.live.get(key);
    if (t && (t.child.exitCode !== null || t.child.signalCode !== null)) t = undefined;
    if (t) this.live.delete(key);
    t ??= start(python, env);
    this.live.set(key, t);
    for (const [k, old] of this.live) {
      if (this.live.size <= this.max) break;
      this.live.delete(k);
      (old.child.stdin as Writable).end();
    }
    return { socket: t.socket, pid: t.child.pid! };
  }
}

function start(python: string, env: NodeJS.ProcessEnv): Template {
  const dir = mkdtempSync(join(tmpdir(), 'thinkfl-engine-'));
  const socket = join(dir, 'template.sock');
  const child = spawn(python, ['-m', 'thinkfl_engine.template', socket], { env, stdio: ['pipe', 'ignore', 'pipe'] });
  // Its import-time warnings are dropped (each forked engine logs its own); a template that fails shows why.
  let tail = '';
  (child.stderr as Readable).setEncoding('utf8').on('data', (t: string) => {
    tail = (tail + t).slice(-4000);
  });
  child.on('error', () => undefined);
  child.on('close', (code) => {
    rmSync(dir, { recursive: true, force: true });
    if (code !== 0 && code !== null)
      process.stderr.write(`[engine template] exited with code ${code}; engines start without it\n${tail}\n`);
  });
  // This process may exit with the template idle: the template sees its stdin close and follows.
  child.unref();
  (child.stdin as Writable & { unref(): void }).unref();
  (child.stderr as Readable & { unref(): void }).unref();
  return { child, socket };
}

/** Whether engines of this shape start from a template: one process, and no CUDA device that a fork would break. */
export function forksEngines(launch: EngineLaunch, singleProcess: boolean): boolean {
  if (launch === 'spawn' || !singleProcess) return false;
  return launch === 'fork' || !existsSync('/dev/nvidiactl');
}
