/**
 * Engine templates (engine/thinkfl_engine/template.py): a Python process that has imported the
 * engine once and forks each engine from it, so that an engine starts in about 0.2 s of CPU
 * instead of 5.5 s (docs/experiments.md, "The CI run's length" 6 and 7). The driver spawns
 * `shim.py` in the engine's place, which asks the template for the fork (and starts the template
 * if none listens); the driver's process, pipes, exit status and kill are the shim's, as they were
 * the engine's.
 *
 * One template serves every process of this user that starts engines with the same interpreter,
 * engine directory, environment and cgroup (a Slurm job or a pod has its own): a restarted train
 * worker or a resumed run forks from the template its predecessor started. The template leaves
 * after THINKFL_ENGINE_TEMPLATE_IDLE_S seconds without an engine (default 60). Templates fork only
 * single-process engines on a machine without an NVIDIA device: a CUDA context does not survive fork.
 */
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** How an engine process starts: forked from a template, or as a fresh Python process. */
export type EngineLaunch = 'auto' | 'spawn' | 'fork';

/** Seconds a template stays without an engine before it leaves (template.py; default 60). */
export const TEMPLATE_IDLE_ENV = 'THINKFL_ENGINE_TEMPLATE_IDLE_S';

/** Linux's limit on a socket's path (sun_path, 108 bytes with its NUL). */
const MAX_SOCKET_PATH = 107;

/** The directory of this user's template sockets: $XDG_RUNTIME_DIR or the temporary directory, under a name with the uid. */
export function defaultTemplateDir(): string {
  return join(process.env.XDG_RUNTIME_DIR || tmpdir(), `thinkfl-engine-${process.getuid?.() ?? 'user'}`);
}

const refusedDirs = new Set<string>();

/**
 * The socket of the template for engines started with exactly this interpreter, engine directory
 * and environment from this process's cgroup; null (the engine is spawned) where `dir` is not a
 * directory only this user can enter, or the path would be too long for a socket.
 */
export function templateSocket(python: string, engineDir: string, env: NodeJS.ProcessEnv, dir = defaultTemplateDir()): string | null {
  const why = privateDirProblem(dir);
  if (why) {
    if (!refusedDirs.has(dir)) process.stderr.write(`[engine] engines start without a template: ${why}\n`);
    refusedDirs.add(dir);
    return null;
  }
  const entries = Object.entries(env)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const cgroup = existsSync('/proc/self/cgroup') ? readFileSync('/proc/self/cgroup', 'utf8') : '';
  const key = createHash('sha256')
    .update(JSON.stringify([python, engineDir, entries, cgroup]))
    .digest('hex')
    .slice(0, 32);
  const socket = join(dir, `${key}.sock`);
  return Buffer.byteLength(socket) <= MAX_SOCKET_PATH ? socket : null;
}

/** Why `dir` may not hold template sockets (another user could reach them), or null when it may. */
function privateDirProblem(dir: string): string | null {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const st = lstatSync(dir);
    if (!st.isDirectory()) return `${dir} is not a directory`;
    const uid = process.getuid?.();
    if (uid !== undefined && st.uid !== uid) return `${dir} belongs to uid ${st.uid}, not ${uid}`;
    if (st.mode & 0o077) return `${dir} is open to other users (mode ${(st.mode & 0o777).toString(8)}; want 700)`;
    return null;
  } catch (e) {
    return `${dir}: ${(e as Error).message}`;
  }
}

/** Whether engines of this shape start from a template: one process, and no CUDA device that a fork would break. */
export function forksEngines(launch: EngineLaunch, singleProcess: boolean): boolean {
  if (launch === 'spawn' || !singleProcess) return false;
  return launch === 'fork' || !existsSync('/dev/nvidiactl');
}
