/**
 * Checkpoint pruning (checkpoints.keep_last) and the resume rewind: stage-end checkpoints
 * survive pruning; a state ahead of the trainer's checkpoint goes back to that checkpoint's
 * snapshot, and a state without any checkpoint starts over.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { initialState, rewindTo, writeSnapshot } from '../src/run-files/state';
import { pruneCheckpoints } from '../src/controller/index';
import { checkpointDir, writeTrainerState } from '../src/workers/run-files';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function runDirWithCheckpoints(updates: number[]): string {
  const runDir = mkdtempSync(join(tmpdir(), 'h11-ckpt-'));
  dirs.push(runDir);
  for (const u of updates) {
    mkdirSync(checkpointDir(runDir, u), { recursive: true });
    writeTrainerState(checkpointDir(runDir, u), u);
  }
  return runDir;
}

describe('pruneCheckpoints', () => {
  it('keeps the last keep_last checkpoints and every stage-end one', () => {
    const runDir = runDirWithCheckpoints([2, 4, 6, 8, 10, 12]);
    const state = initialState('r', '/m');
    state.stage_checkpoints = { sft: checkpointDir(runDir, 4) };
    const gone = pruneCheckpoints(runDir, state, 2);
    expect(gone).toEqual([2, 6, 8].map((u) => checkpointDir(runDir, u)));
    for (const u of [4, 10, 12]) expect(existsSync(checkpointDir(runDir, u))).toBe(true);
    for (const u of [2, 6, 8]) expect(existsSync(checkpointDir(runDir, u))).toBe(false);
  });
});

describe('rewindTo', () => {
  it("returns to the snapshot taken at the trainer's checkpoint, or starts over without one", () => {
    const runDir = runDirWithCheckpoints([]);
    const atFour = initialState('r', '/m');
    atFour.updates = 4;
    atFour.sft = { updates: 4, done: false };
    atFour.metrics_lines = 4;
    writeSnapshot(runDir, atFour);
    const ahead = structuredClone(atFour);
    ahead.updates = 6;
    ahead.stages.priming.steps = 2;
    ahead.metrics_lines = 7;
    expect(rewindTo(runDir, ahead, 4, '/m')).toEqual(atFour);
    expect(rewindTo(runDir, ahead, 6, '/m')).toBe(ahead);
    expect(rewindTo(runDir, ahead, undefined, '/m')).toMatchObject({ updates: 0, metrics_lines: 0, policy_dir: '/m' });
    expect(() => rewindTo(runDir, ahead, 5, '/m')).toThrow(/checkpoint at update 5 has no controller state snapshot/);
  });
});
