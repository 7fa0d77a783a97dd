/**
 * Where a Nezha day lies: an extracted tree (rca_data/<date>, construct_data/<date>) or the
 * published tgz files, which are extracted with the system tar into a temp dir.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface NezhaTree {
  /** rca_data/<date> */
  rca: string;
  /** construct_data/<date> (fault-free) */
  construct: string;
  /** Removes the temp extraction, if any. */
  dispose(): void;
}

export async function openNezha(src: string, date: string, withLogs: boolean): Promise<NezhaTree> {
  const at = (root: string): NezhaTree => ({
    rca: join(root, 'rca_data', date),
    construct: join(root, 'construct_data', date),
    dispose: () => {},
  });
  if (existsSync(join(src, 'rca_data', date))) return at(src);
  const data = join(src, `trainticket-${date}.tgz`);
  if (!existsSync(data)) throw new Error(`nezha: neither ${join(src, 'rca_data', date)} nor ${data} exists`);
  const tmp = mkdtempSync(join(tmpdir(), 'nezha-'));
  try {
    const archives = [data];
    const logs = join(src, `trainticket-${date}-logs.tgz`);
    if (withLogs && existsSync(logs)) archives.push(logs);
    await Promise.all(archives.map((a) => run('tar', ['-xzf', a, '-C', tmp])));
  } catch (e) {
    rmSync(tmp, { recursive: true, force: true });
    throw new Error(`nezha: cannot extract ${data}: ${(e as Error).message}`);
  }
  return { ...at(tmp), dispose: () => rmSync(tmp, { recursive: true, force: true }) };
}
