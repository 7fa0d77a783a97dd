/**
 * What tests build once into .cache and reuse: a hash of the source files a build comes from
 * (so that a change to them rebuilds), and a lock under which one of the test files running in
 * parallel builds while the others wait and then find it built. A dead holder's lock is taken
 * over, so a killed test run does not leave the next one waiting.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';

/**
 * SHA-1 over the names and contents of `path` (a file, or a directory's files, recursively, in
 * name order), without Python's bytecode caches, which running the code writes.
 */
export function sourceHash(path: string): string {
  const h = createHash('sha1');
  if (!statSync(path).isDirectory()) return h.update(basename(path)).update(readFileSync(path)).digest('hex');
  for (const name of readdirSync(path).sort()) {
    if (name === '__pycache__') continue;
    const p = join(path, name);
    h.update(name);
    h.update(statSync(p).isDirectory() ? sourceHash(p) : readFileSync(p));
  }
  return h.digest('hex');
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Runs `build` under `lock` unless `done()` holds, before or after waiting for another holder. */
export async function withLock(lock: string, done: () => boolean, build: () => void | Promise<void>): Promise<void> {
  for (;;) {
    if (done()) return;
    try {
      mkdirSync(lock);
      break;
    } catch {
      const holder = Number(readFileSync(join(lock, 'pid'), { encoding: 'utf8', flag: 'a+' }) || 0);
      if (holder && !alive(holder)) rmSync(lock, { recursive: true, force: true });
      await new Promise((r) => setTimeout(r, 1000));
    }
  }
  try {
    writeFileSync(join(lock, 'pid'), String(process.pid));
    if (!done()) await build();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}
