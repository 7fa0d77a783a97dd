/**
 * Where a Nezha day lies: an extracted tree (rca_data/<date>, construct_data/<date>) or the
 * published tgz files, which are extracted with the system tar into a temp dir.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { LayoutError } from '../errors';

const run = promisify(execFile);

export interface NezhaTree {
  /** rca_data/<date> */
  rca: string;
  /** construct_data/<date> (fault-free) */
  construct: string;
  /** Where the logs come from: the tree's log folder or the logs archive. */
  logsSource: string;
  /** A path of the tree as the user can find it: itself, or its place in the archive. */
  show(path: string): string;
  /** Removes the temp extraction, if any. */
  dispose(): void;
}

export async function openNezha(src: string, date: string, withLogs: boolean): Promise<NezhaTree> {
  const at = (root: string, show: (p: string) => string, logsSource: string): Omit<NezhaTree, 'dispose'> => ({
    rca: join(root, 'rca_data', date),
    construct: join(root, 'construct_data', date),
    logsSource,
    show,
  });
  if (existsSync(join(src, 'rca_data', date))) return { ...at(src, (p) => p, join(src, 'rca_data', date, 'log')), dispose: () => {} };
  const data = join(src, `trainticket-${date}.tgz`);
  if (!existsSync(data)) {
    throw new LayoutError(
      join(src, 'rca_data', date),
      `is missing, and so is ${data}`,
      'the Nezha layout keeps the fault day there (trace/, metric/, log/, traceid/ and the fault list), with the ' +
        'fault-free traces in construct_data/<date>/trace; or give the directory of the published trainticket-<date>.tgz files',
    );
  }
  const tmp = mkdtempSync(join(tmpdir(), 'nezha-'));
  const logs = join(src, `trainticket-${date}-logs.tgz`);
  try {
    await Promise.all((withLogs && existsSync(logs) ? [data, logs] : [data]).map((a) => run('tar', ['-xzf', a, '-C', tmp])));
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw new Error(`nezha: cannot extract ${data}: ${(e as Error).message}`);
  }
  const show = (p: string) => `${relative(tmp, p)} (extracted from ${src})`;
  return { ...at(tmp, show, logs), dispose: () => removeExtraction(tmp) };
}

/**
 * Removes a temp extraction after the import. rmSync has failed here once with ENOTEMPTY on ext4
 * with nothing else writing (a fresh checkout's first import), so it retries as Node's docs advise,
 * and a tree that still stays is named, not thrown: the import it served has succeeded.
 */
function removeExtraction(tmp: string): void {
  try {
    rmSync(tmp, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  } catch (e) {
    console.warn(`nezha: could not remove the temporary extraction ${tmp} (${(e as Error).message}); delete it by hand`);
  }
}
