/** engine/README.md's file table names every file of the engine package, so none is left unexplained. */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../../testkit/nezha';

describe('engine/README.md', () => {
  it('lists every file of engine/thinkfl_engine in its file table', () => {
    const readme = readFileSync(join(REPO_ROOT, 'engine', 'README.md'), 'utf8');
    const table = readme.split('\n').filter((l) => l.startsWith('| `'));
    const named = new Set(table.flatMap((row) => [...row.matchAll(/`([^`]+)`/g)].map((m) => m[1])));
    const files = readdirSync(join(REPO_ROOT, 'engine', 'thinkfl_engine'), { withFileTypes: true })
      .filter((e) => e.isFile() && !e.name.endsWith('.pyc'))
      .map((e) => e.name);
    expect(files.length).toBeGreaterThan(10);
    expect(files.filter((f) => !named.has(f))).toEqual([]);
  });
});
