/**
 * Where the train worker keeps its outputs in the run directory: exported policies
 * (policies/v<version>, or adapters/v<version> with a checksum manifest when inference servers
 * load them over HTTP) and checkpoints (checkpoints/update-<n>, n = updates done). All are
 * written under a temporary name and renamed, so a directory that exists is complete.
 */
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { asDiskError, writing } from '../disk-errors';

/** Folder of exported policies: `adapters` for the servers of the vllm backend, `policies` otherwise. */
export type PolicyFolder = 'policies' | 'adapters';

export const policyDir = (runDir: string, version: number, folder: PolicyFolder = 'policies') => join(runDir, folder, `v${version}`);
export const checkpointDir = (runDir: string, updates: number) => join(runDir, 'checkpoints', `update-${String(updates).padStart(6, '0')}`);
/** Bulk data beside the queue (step files, long trajectories); shared by every worker of the run. */
export const dataDir = (runDir: string) => join(runDir, 'data');

/** Written into every checkpoint: how many updates its weights have seen. */
export const TRAINER_STATE_FILE = 'trainer-state.json';

export interface Checkpoint {
  dir: string;
  updates: number;
}

/** Checkpoints of the run directory, oldest first. */
export function listCheckpoints(runDir: string): Checkpoint[] {
  const root = join(runDir, 'checkpoints');
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .filter((n) => /^update-\d+$/.test(n) && existsSync(join(root, n, TRAINER_STATE_FILE)))
    .map((n) => {
      const dir = join(root, n);
      const state = JSON.parse(readFileSync(join(dir, TRAINER_STATE_FILE), 'utf8')) as { updates: number };
      return { dir, updates: state.updates };
    })
    .sort((a, b) => a.updates - b.updates);
}

export function latestCheckpoint(runDir: string): Checkpoint | undefined {
  return listCheckpoints(runDir).at(-1);
}

/**
 * Writes a directory through `write(tmpDir)` and renames it into place, replacing an older one.
 * A failed write removes its temporary directory (giving back the space a full disk needs) and
 * leaves `dir` as it was; a full or read-only file system is reported as a DiskError naming `dir`.
 */
export async function writeAtomically(dir: string, write: (tmp: string) => Promise<void>): Promise<void> {
  const tmp = `${dir}.tmp-${process.pid}`;
  try {
    rmSync(tmp, { recursive: true, force: true });
    await write(tmp);
  } catch (e) {
    try {
      rmSync(tmp, { recursive: true, force: true });
    } catch {
      // A read-only directory keeps the partial one; the next write of `dir` removes it first.
    }
    throw asDiskError(e, dir) ?? e;
  }
  writing(dir, () => {
    rmSync(dir, { recursive: true, force: true });
    renameSync(tmp, dir);
  });
}

export function writeTrainerState(dir: string, updates: number): void {
  writeFileSync(join(dir, TRAINER_STATE_FILE), `${JSON.stringify({ updates, savedAt: new Date().toISOString() })}\n`);
}

/** Deletes exported policies older than `keepFrom` (rollout workers may still be asked for recent ones). */
export function prunePolicies(runDir: string, keepFrom: number, folder: PolicyFolder = 'policies'): void {
  const root = join(runDir, folder);
  if (!existsSync(root)) return;
  for (const n of readdirSync(root)) {
    const m = /^v(\d+)$/.exec(n);
    if (m && Number(m[1]) < keepFrom) rmSync(join(root, n), { recursive: true, force: true });
  }
}
