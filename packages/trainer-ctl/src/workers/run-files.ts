/**
 * Where the train worker keeps its outputs in the run directory: exported policies
 * (policies/v<version>, or adapters/v<version> with a checksum manifest when inference servers
 * load them over HTTP) and checkpoints (checkpoints/update-<n>, n = updates done). All are
 * written under a temporary name and renamed; a checkpoint is also checked before a resume
 * trusts it (checkpoint-integrity.ts).
 */
import { existsSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { asDiskError, writing } from '../disk-errors';
import { checkedTrainerState } from './checkpoint-integrity';

/** Folder of exported policies: `adapters` for the servers of the vllm backend, `policies` otherwise. */
export type PolicyFolder = 'policies' | 'adapters';

export const policyDir = (runDir: string, version: number, folder: PolicyFolder = 'policies') => join(runDir, folder, `v${version}`);
export const checkpointDir = (runDir: string, updates: number) => join(runDir, 'checkpoints', `update-${String(updates).padStart(6, '0')}`);
/** Bulk data beside the queue (step files, long trajectories); shared by every worker of the run. */
export const dataDir = (runDir: string) => join(runDir, 'data');

export { TRAINER_STATE_FILE, writeTrainerState } from './checkpoint-integrity';

export interface Checkpoint {
  dir: string;
  updates: number;
}

/** A checkpoint directory that is not whole, and why. */
export interface TornCheckpoint {
  dir: string;
  why: string;
}

/** Checkpoints of the run directory, oldest first: the whole ones, and those found torn. */
export function scanCheckpoints(runDir: string): { good: Checkpoint[]; torn: TornCheckpoint[] } {
  const root = join(runDir, 'checkpoints');
  const good: Checkpoint[] = [];
  const torn: TornCheckpoint[] = [];
  if (!existsSync(root)) return { good, torn };
  for (const n of readdirSync(root)
    .filter((x) => /^update-\d+$/.test(x))
    .sort()) {
    const dir = join(root, n);
    try {
      good.push({ dir, updates: checkedTrainerState(dir).updates });
    } catch (e) {
      torn.push({ dir, why: (e as Error).message });
    }
  }
  good.sort((a, b) => a.updates - b.updates);
  return { good, torn };
}

/** The whole checkpoints of the run directory, oldest first. */
export function listCheckpoints(runDir: string): Checkpoint[] {
  return scanCheckpoints(runDir).good;
}

/**
 * The checkpoint a run resumes from: the newest whole one. `onTorn` hears of each newer one that
 * is torn, named beside the one taken instead.
 */
export function latestCheckpoint(runDir: string, onTorn?: (line: string) => void): Checkpoint | undefined {
  const { good, torn } = scanCheckpoints(runDir);
  const latest = good.at(-1);
  for (const t of torn) {
    if (latest && t.dir < latest.dir) continue;
    onTorn?.(`checkpoint ${t.dir} is torn (${t.why}); resuming from ${latest?.dir ?? 'the base model'} instead`);
  }
  return latest;
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

/**
 * Deletes the temporary directories of writes that never finished (a train worker killed in an
 * export or a checkpoint): the run's one train worker calls it before it writes anything.
 */
export function removeUnfinishedWrites(runDir: string, folder: PolicyFolder = 'policies'): string[] {
  const gone: string[] = [];
  for (const root of [join(runDir, 'checkpoints'), join(runDir, folder)]) {
    if (!existsSync(root)) continue;
    for (const n of readdirSync(root).filter((x) => /\.tmp-\d+$/.test(x))) {
      rmSync(join(root, n), { recursive: true, force: true });
      gone.push(join(root, n));
    }
  }
  return gone;
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
