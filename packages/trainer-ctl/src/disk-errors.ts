/**
 * A full (ENOSPC), over-quota (EDQUOT) or read-only (EROFS) file system under the run directory.
 * Retrying cannot fix it and the raw errors say too little to act on: Node's "ENOSPC: no space
 * left on device, write" names no path, and the engine's "[Errno 28] ..." or "(os error 28)"
 * names a temporary file or nothing. So a write of the run directory turns such an error into
 * one DiskError that names what was being written and the space left on its file system: the
 * line the run stops with, and the reason workers give up at once instead of retrying.
 */
import { accessSync, constants, existsSync, statfsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/** What each problem reads as, and its errno on Linux (how the Python engine's errors carry it). */
const PROBLEMS = {
  ENOSPC: { errno: 28, text: 'no space left on device', fix: 'free space on that file system' },
  EDQUOT: { errno: 122, text: 'disk quota exceeded', fix: 'free space or raise the quota' },
  EROFS: { errno: 30, text: 'read-only file system', fix: 'make it writable' },
} as const;

export type DiskProblem = keyof typeof PROBLEMS;

const isProblem = (code: unknown): code is DiskProblem => typeof code === 'string' && Object.hasOwn(PROBLEMS, code);

/**
 * The disk problem an error reports: a Node error's code, else its message's errno (Python's
 * "[Errno 28]", Rust's "(os error 28)") or text ("No space left on device", also in a
 * DiskError's message passed on as text, e.g. a failed job's reason).
 */
export function diskProblem(e: unknown): DiskProblem | undefined {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  if (isProblem(code)) return code;
  const message = e instanceof Error ? e.message : String(e);
  return (Object.keys(PROBLEMS) as DiskProblem[]).find((k) => {
    const { errno, text } = PROBLEMS[k];
    return message.includes(`[Errno ${errno}]`) || message.includes(`(os error ${errno})`) || message.toLowerCase().includes(text);
  });
}

/** What to do before resuming a run stopped by `problem`. */
export const diskFix = (problem: DiskProblem): string => PROBLEMS[problem].fix;

/** Bytes an unprivileged writer may still use on the file system of `path` (or of its nearest existing parent). */
export function freeBytes(path: string): number | undefined {
  for (let p = resolve(path); ; p = dirname(p)) {
    try {
      const s = statfsSync(p);
      return s.bavail * s.bsize;
    } catch {
      if (p === dirname(p)) return undefined;
    }
  }
}

export function formatBytes(n: number): string {
  const units = ['B', 'kB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1000 && i < units.length - 1) {
    n /= 1000;
    i++;
  }
  return i === 0 ? `${n} B` : `${n.toFixed(1)} ${units[i]}`;
}

export class DiskError extends Error {
  override name = 'DiskError';
  constructor(
    readonly problem: DiskProblem,
    /** What was being written. */
    readonly path: string,
    /** Bytes free on its file system when the write failed. */
    readonly free: number | undefined,
  ) {
    const space = free === undefined ? 'free space unknown' : `${formatBytes(free)} free`;
    super(`${PROBLEMS[problem].text} writing ${path} (${space} on that file system)`);
  }
}

/**
 * Node's recursive mkdir reports a read-only file system as ENOENT (Node 20): the nearest
 * existing parent, asked for write access, tells the two apart.
 */
function mkdirProblem(e: unknown): DiskProblem | undefined {
  const err = e as NodeJS.ErrnoException | undefined;
  if (err?.code !== 'ENOENT' || err.syscall !== 'mkdir' || !err.path) return undefined;
  let p = dirname(err.path);
  while (!existsSync(p) && p !== dirname(p)) p = dirname(p);
  try {
    accessSync(p, constants.W_OK);
    return undefined;
  } catch (denied) {
    const code = (denied as NodeJS.ErrnoException).code;
    return isProblem(code) ? code : undefined;
  }
}

/** `e` as a DiskError about writing `path` when it reports a disk problem; a DiskError already made is kept (it names the innermost path). */
export function asDiskError(e: unknown, path: string): DiskError | undefined {
  if (e instanceof DiskError) return e;
  const problem = diskProblem(e) ?? mkdirProblem(e);
  return problem && new DiskError(problem, path, freeBytes(path));
}

/**
 * A Node fs error of a disk problem that no write named, as a DiskError: about the error's own
 * path (open, rename) or, for a write to a descriptor (which names none), about `where`.
 */
export function fsDiskError(e: unknown, where: string): DiskError | undefined {
  const err = e as NodeJS.ErrnoException | undefined;
  const problem = isProblem(err?.code) ? err.code : mkdirProblem(e);
  if (!problem) return undefined;
  const path = err?.path ?? where;
  return new DiskError(problem, path, freeBytes(path));
}

/** Runs `write` (of `path`); a disk problem it throws becomes a DiskError naming `path`. */
export function writing<T>(path: string, write: () => T): T {
  try {
    return write();
  } catch (e) {
    throw asDiskError(e, path) ?? e;
  }
}
