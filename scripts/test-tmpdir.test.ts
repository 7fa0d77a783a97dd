/**
 * The test run's temporary files go in one directory that testkit/global-setup.ts makes and removes
 * when the run ends: test files and the processes they start (engines, torchrun, Python's tempfile)
 * see it as their TMPDIR, so a run leaves nothing in the machine's /tmp.
 */
import { execFileSync } from 'node:child_process';
import { basename } from 'node:path';
import { tmpdir } from 'node:os';
import { describe, expect, it } from 'vitest';
import { ENGINE_PYTHON } from '../packages/trainer-ctl/src/engine';

describe('test run temp dir', () => {
  it("is the run's own, here and in the Python processes tests start", () => {
    expect(basename(tmpdir())).toMatch(/^thinkfl-tests-/);
    const python = execFileSync(ENGINE_PYTHON, ['-c', 'import tempfile; print(tempfile.gettempdir())'], { encoding: 'utf8' }).trim();
    expect(python).toBe(tmpdir());
  });
});
