/**
 * Processes a run starts itself when it has no Redis URL: the embedded redis-server and the
 * rollout and train workers (`trainer-ctl worker ...`, children logging to RUN_DIR/logs).
 * Their pids go to RUN_DIR/processes.json, so a run resumed after its controller was killed
 * (its children survive a SIGKILL) first stops the ones still alive: two redis-servers on one
 * append-only file, or two trainers on one run directory, would corrupt it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { writeJsonAtomically } from '../run-files/state';

const CLI = resolve(import.meta.dirname, '..', '..', 'bin', 'trainer-ctl.mjs');
export const PROCESSES_FILE = 'processes.json';

export interface ProcessRecord {
  pid: number;
  /** A word the process's command line contains, so a reused pid is never killed by mistake. */
  marker: string;
  role: string;
}

function alive(p: ProcessRecord): boolean {
  try {
    return readFileSync(`/proc/${p.pid}/cmdline`, 'utf8').includes(p.marker);
  } catch {
    return false;
  }
}

async function waitGone(p: ProcessRecord, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (alive(p)) {
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, 100));
  }
  return true;
}

/** Stops what a previous controller of this run directory left running; returns what it stopped. */
export async function stopLeftovers(runDir: string): Promise<ProcessRecord[]> {
  const file = join(runDir, PROCESSES_FILE);
  if (!existsSync(file)) return [];
  const left = (JSON.parse(readFileSync(file, 'utf8')) as ProcessRecord[]).filter(alive);
  // Workers first, so none is still writing when Redis goes.
  for (const p of [...left].sort((a, b) => Number(a.role === 'redis') - Number(b.role === 'redis'))) {
    process.kill(p.pid, 'SIGTERM');
    if (!(await waitGone(p, 60_000))) {
      process.kill(p.pid, 'SIGKILL');
      await waitGone(p, 5_000);
    }
  }
  writeJsonAtomically(file, []);
  return left;
}

export function recordProcesses(runDir: string, records: ProcessRecord[]): void {
  writeJsonAtomically(join(runDir, PROCESSES_FILE), records);
}

export interface WorkerProcess {
  record: ProcessRecord;
  child: ChildProcess;
}

/**
 * Starts `trainer-ctl worker <kind> <args...>` with stdout and stderr in RUN_DIR/logs/<name>.log;
 * `env` adds to the environment (secrets go there: a command line is visible to every local user).
 */
export function startWorkerProcess(
  runDir: string,
  name: string,
  kind: 'rollout' | 'train',
  args: string[],
  env: Record<string, string> = {},
): WorkerProcess {
  const logs = join(runDir, 'logs');
  mkdirSync(logs, { recursive: true });
  const out = openSync(join(logs, `${name}.log`), 'a');
  const child = spawn(process.execPath, [CLI, 'worker', kind, ...args], { stdio: ['ignore', out, out], env: { ...process.env, ...env } });
  return { record: { pid: child.pid!, marker: 'trainer-ctl', role: name }, child };
}

/**
 * SIGTERM (a rollout worker finishes its episode, the train worker stops its engine at once;
 * both leave the registry), SIGKILL after `graceMs`.
 */
export async function stopWorkerProcesses(procs: WorkerProcess[], graceMs = 30_000): Promise<void> {
  await Promise.all(
    procs.map(async ({ child }) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    }),
  );
}
