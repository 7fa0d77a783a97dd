/** `trainer-ctl config validate|schema` as a user runs them: exit status, stdout, stderr. */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../../testkit/nezha';

const tmp = mkdtempSync(join(tmpdir(), 'thinkfl-config-cli-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function cli(...args: string[]) {
  const r = spawnSync(process.execPath, [join(REPO_ROOT, 'packages/trainer-ctl/bin/trainer-ctl.mjs'), ...args], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('trainer-ctl config', () => {
  it('validates a preset and reports its run directory', () => {
    const r = cli('config', 'validate', 'configs/qwen2.5-3b.yaml');
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout.split('\n').at(-2)).toBe(
      `configs/qwen2.5-3b.yaml: ok (run qwen2.5-3b, run directory ${join(REPO_ROOT, 'runs', 'qwen2.5-3b')})`,
    );
  });

  it('exits 1 with located errors for a bad config', () => {
    const bad = join(tmp, 'bad.yaml');
    writeFileSync(
      bad,
      'run: { name: x }\nmodel: { hub_id: Qwen/Qwen2.5-3B-Instruct }\ndataset: { path: nowhere }\ngrpo: { group_size: eight }\n',
    );
    const r = cli('config', 'validate', bad);
    expect(r.status).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`${bad}:4: grpo.group_size: expected number, got string "eight"\n`);
  });

  it('prints the JSON Schema that configs/run.schema.json holds', () => {
    const r = cli('config', 'schema');
    expect(r.status).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual(JSON.parse(readFileSync(join(REPO_ROOT, 'configs', 'run.schema.json'), 'utf8')));
  });
});

describe('trainer-ctl worker flags', () => {
  it('names the flag of a bad lock duration or stalled interval, before it reads the config or Redis', () => {
    for (const [flag, value] of [
      ['--lock-duration-ms', '50'],
      ['--stalled-interval-ms', '2.5'],
    ]) {
      const r = cli('worker', 'rollout', '--config', join(tmp, 'never-read.yaml'), flag, value);
      expect(r.status).toBe(2); // a usage error (cli.ts)
      expect(r.stderr).toContain(`${flag} must be an integer >= 100 (ms), got ${value}`);
      expect(r.stderr).not.toContain('lockDurationMs');
      expect(r.stderr).not.toContain('never-read.yaml');
    }
  });
});
