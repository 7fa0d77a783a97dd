/**
 * Before any test: imports the shared Nezha data once per test run (cached under .cache/), and gives
 * the run a temporary directory of its own (TMPDIR, which Node's `os.tmpdir()`, Python's `tempfile`
 * and torchrun all read), removed when the run ends. Test files make temp dirs (damaged dataset
 * copies, model dirs, engine sockets) and so do the processes they start (torchrun's log dirs), not
 * all of which a failing or killed test removes: `.ci/run` at 48633d4 left 107 entries in /tmp.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureNezhaDataset } from './nezha';

export default async function setup(): Promise<() => void> {
  await ensureNezhaDataset();
  // Set before vitest forks its workers, which inherit it with the rest of the environment.
  const dir = mkdtempSync(join(tmpdir(), 'thinkfl-tests-'));
  process.env.TMPDIR = dir;
  return () => rmSync(dir, { recursive: true, force: true });
}
