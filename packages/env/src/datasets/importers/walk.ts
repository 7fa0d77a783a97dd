/** Files of a source tree, recursively, in a stable order. */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

export function walkFiles(dir: string, accept: (name: string) => boolean): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...walkFiles(p, accept));
    else if (accept(name)) out.push(p);
  }
  return out;
}
