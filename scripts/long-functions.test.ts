/**
 * npm run check:functions on a planted tree: a TypeScript method and a Python function of 81
 * lines fail it, each named with file, line and length; functions of exactly 80 lines, a test
 * file and a long function outside product source do not count; an allow-list entry with a
 * reason lets a function pass, and one that names no long function fails as stale.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../testkit/nezha';

const dir = mkdtempSync(join(tmpdir(), 'long-functions-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A TypeScript function whose text spans exactly `lines` lines. */
const tsFunction = (header: string, lines: number) => `${header} {\n${'  x++;\n'.repeat(lines - 2)}}\n`;
/** A Python function of exactly `lines` lines. */
const pyFunction = (name: string, lines: number, indent = '') => `${indent}def ${name}():\n${`${indent}    pass\n`.repeat(lines - 1)}`;

function plant(path: string, text: string): void {
  mkdirSync(join(dir, path, '..'), { recursive: true });
  writeFileSync(join(dir, path), text);
}

function check(): { status: number | null; out: string } {
  const r = spawnSync(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'scripts', 'long-functions.ts'), '--root', dir], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
  });
  return { status: r.status, out: r.stdout + r.stderr };
}

describe('check:functions', () => {
  it('fails on a function over 80 lines unless the allow-list names it with a reason', () => {
    // Line 1 is a comment and line 2 opens the class: the method starts on line 3.
    plant('packages/a/src/long.ts', `// planted\nclass Writer {\n${tsFunction('  append()', 81)}}\nlet x = 0;\n`);
    plant('packages/a/src/fits.ts', `let x = 0;\n${tsFunction('export function fits()', 80)}`);
    plant('packages/a/test/long.test.ts', `let x = 0;\n${tsFunction('export function inTest()', 120)}`);
    plant('scripts/tool.ts', `let x = 0;\n${tsFunction('export function tool()', 120)}`);
    plant('engine/thinkfl_engine/ops.py', `class Trainer:\n${pyFunction('step', 81, '    ')}\n${pyFunction('fits', 80)}`);

    const failed = check();
    expect(failed.status).toBe(1);
    expect(failed.out).toContain('packages/a/src/long.ts:3 Writer.append 81 lines');
    expect(failed.out).toContain('engine/thinkfl_engine/ops.py:2 Trainer.step 81 lines');
    expect(failed.out).not.toMatch(/fits|inTest|tool/);
    expect(failed.out).toContain('2 functions over 80 lines, 0 allowed with a reason, 2 not');

    plant(
      'scripts/long-functions.allow',
      '# planted\npackages/a/src/long.ts#Writer.append: one write reads top to bottom\nengine/thinkfl_engine/ops.py#Trainer.step: one step\n',
    );
    const allowed = check();
    expect(allowed.out).toContain('2 functions over 80 lines, 2 allowed with a reason, 0 not');
    expect(allowed.status).toBe(0);

    plant('packages/a/src/long.ts', `class Writer {\n${tsFunction('  append()', 80)}}\nlet x = 0;\n`);
    const stale = check();
    expect(stale.status).toBe(1);
    expect(stale.out).toContain('packages/a/src/long.ts#Writer.append is not over 80 lines (or gone): drop it from the list');

    plant('scripts/long-functions.allow', 'packages/a/src/long.ts#Writer.append\n');
    const bare = check();
    expect(bare.status).toBe(1);
    expect(bare.out).toContain('long-functions.allow:1: expected "path#name: reason"');
  }, 120_000);
});
