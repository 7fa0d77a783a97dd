/**
 * checkpoints.keep_last: after each new checkpoint the oldest ones are deleted, except the
 * checkpoints that ended a stage (or SFT), which the run keeps as its per-stage results, and the
 * one the live train engine was loaded from: the engine reads nothing from it after loading, but
 * its weights and every policy it published since derive from it, so it stays on disk with them.
 */
import { rmSync } from 'node:fs';
import { resolve } from 'node:path';
import { listCheckpoints } from '../workers/run-files';
import type { RunState } from '../run-files/state';

/** Deletes surplus checkpoints; returns the directories deleted. */
export function pruneCheckpoints(runDir: string, state: RunState, keepLast: number): string[] {
  const keep = new Set(
    [...Object.values(state.stage_checkpoints ?? {}), ...(state.engine_checkpoint ? [state.engine_checkpoint] : [])].map((d) => resolve(d)),
  );
  const all = listCheckpoints(runDir);
  for (const c of all.slice(-keepLast)) keep.add(resolve(c.dir));
  const gone = all.map((c) => resolve(c.dir)).filter((d) => !keep.has(d));
  for (const d of gone) rmSync(d, { recursive: true, force: true });
  return gone;
}
