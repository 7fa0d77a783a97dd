/**
 * The CLI's bundle cache (bin/cli-bundle.mjs) on a copy of the package: the first start builds
 * it, an unchanged tree reuses it, a changed or added source is picked up at the next start,
 * paths the sources take from their own location still resolve, and a tree that does not bundle
 * or a cache that cannot be written falls back to tsx's loader.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../../testkit/nezha';

let root: string;
const pkg = () => join(root, 'packages', 'trainer-ctl');
const cacheDir = () => join(root, '.cache', 'cli');
const bundles = () => readdirSync(cacheDir()).filter((f) => f.endsWith('.mjs'));

function cli(...args: string[]) {
  const r = spawnSync(process.execPath, [join(pkg(), 'bin', 'trainer-ctl.mjs'), ...args], { cwd: root, encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'cli-bundle-'));
  for (const p of ['bin', 'src', 'package.json'])
    cpSync(join(REPO_ROOT, 'packages', 'trainer-ctl', p), join(pkg(), p), { recursive: true });
  cpSync(join(REPO_ROOT, 'tsconfig.json'), join(root, 'tsconfig.json'));
  // npm packages and the other workspace packages come from the repository's node_modules.
  symlinkSync(join(REPO_ROOT, 'node_modules'), join(root, 'node_modules'));
  const manifest = JSON.parse(readFileSync(join(pkg(), 'package.json'), 'utf8'));
  writeFileSync(join(pkg(), 'package.json'), JSON.stringify({ ...manifest, version: '9.8.7-copy' }));
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('the bundled CLI', () => {
  it('is built at the first start and reused while no source changes', () => {
    const first = cli('version');
    expect(first.code, first.stderr).toBe(0);
    // version.ts reads the package.json next to its source, not next to the bundle in .cache/cli.
    expect(first.stdout.trim()).toBe('9.8.7-copy');
    expect(bundles()).toHaveLength(1);
    const built = statSync(join(cacheDir(), 'manifest.json')).mtimeMs;
    const again = cli('version');
    expect(again.stdout.trim()).toBe('9.8.7-copy');
    expect(statSync(join(cacheDir(), 'manifest.json')).mtimeMs).toBe(built);
    expect(bundles()).toHaveLength(1);
  });

  it('is rebuilt when a source changes and when a command file is added', () => {
    const versionTs = join(pkg(), 'src', 'commands', 'version.ts');
    writeFileSync(versionTs, readFileSync(versionTs, 'utf8').replace("'print the trainer-ctl version'", "'print the version, edited'"));
    expect(cli('--help').stdout).toContain('print the version, edited');
    writeFileSync(
      join(pkg(), 'src', 'commands', 'hello.ts'),
      "import type { CommandModule } from 'yargs';\nexport const command: CommandModule = { command: 'hello', describe: 'say hello', handler: () => console.log('hello from a new file') };\n",
    );
    const hello = cli('hello');
    expect(hello.code, hello.stderr).toBe(0);
    expect(hello.stdout.trim()).toBe('hello from a new file');
    expect(bundles().length).toBeGreaterThanOrEqual(2);
  });

  it("falls back to tsx's loader when the sources do not bundle, and bundles again once they do", () => {
    const broken = join(pkg(), 'src', 'commands', 'hello.ts');
    const good = readFileSync(broken, 'utf8');
    writeFileSync(broken, `${good}export const oops = ;\n`);
    const r = cli('version');
    expect(r.code).not.toBe(0);
    // tsx's own error names the file and line at fault.
    expect(r.stderr).toContain(`hello.ts:${good.split('\n').length}:`);
    writeFileSync(broken, good);
    const fixed = cli('hello');
    expect(fixed.code, fixed.stderr).toBe(0);
    expect(fixed.stdout.trim()).toBe('hello from a new file');
    const manifest = JSON.parse(readFileSync(join(cacheDir(), 'manifest.json'), 'utf8'));
    expect(Object.keys(manifest.inputs)).toContain('packages/trainer-ctl/src/commands/hello.ts');
  });

  it('runs through tsx when the cache cannot be written', () => {
    rmSync(join(root, '.cache'), { recursive: true, force: true });
    writeFileSync(join(root, '.cache'), 'a file where the cache folder would be');
    const r = cli('version');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trim()).toBe('9.8.7-copy');
  });
});
