/** Files of a source tree, recursively, in a stable order. */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { LayoutError } from '../errors';

/** The source must be a directory; `keeps` says what the format keeps there. */
export function sourceDir(src: string, keeps: string): void {
  if (!existsSync(src)) throw new LayoutError(src, 'is missing', keeps);
  if (!statSync(src).isDirectory()) throw new LayoutError(src, 'is not a directory', keeps);
}

export function walkFiles(dir: string, accept: (name: string) => boolean): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...walkFiles(p, accept));
    else if (accept(name)) out.push(p);
  }
  return out;
}
