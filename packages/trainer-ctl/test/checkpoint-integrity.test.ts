/**
 * Torn checkpoints are found before a resume trusts them: a safetensors file cut short (written
 * by the safetensors library itself, the independent writer), a file missing from a directory
 * cut mid-write, a directory without its trainer state, an older checkpoint without the size
 * record. The newest whole checkpoint is taken instead, and the message names both.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { camelCaseKeys } from '../../../testkit/camel-keys';
import { ENGINE_PYTHON } from '../src/engine/index';
import {
  checkpointDir,
  latestCheckpoint,
  listCheckpoints,
  safetensorsProblem,
  TRAINER_STATE_FILE,
  writeTrainerState,
} from '../src/workers/index';

let root: string;

/** Checkpoints as the engine writes them: weights by safetensors, an optimizer file, a reference in a subdirectory. */
function writeCheckpoints(runDir: string, updates: number[], withSizes = true): string[] {
  const dirs = updates.map((u) => checkpointDir(runDir, u));
  for (const d of dirs) mkdirSync(join(d, 'reference'), { recursive: true });
  const py = [
    'import sys, torch',
    'from safetensors.torch import save_file',
    'torch.manual_seed(0)',
    'for d in sys.argv[1:]:',
    "    save_file({'w': torch.randn(64, 32), 'b': torch.randn(32)}, d + '/model.safetensors')",
    "    torch.save({'step': 1}, d + '/optimizer.pt')",
    "    torch.save({'tag': 'grpo_start'}, d + '/reference/reference.pt')",
  ].join('\n');
  execFileSync(ENGINE_PYTHON, ['-c', py, ...dirs]);
  dirs.forEach((dir, i) => {
    writeFileSync(join(dir, 'config.json'), '{"model_type": "llama"}\n');
    if (withSizes) writeTrainerState(dir, updates[i]);
    // As checkpoints were written before sizes were recorded (and before issue 28's snake_case rename).
    else writeFileSync(join(dir, TRAINER_STATE_FILE), `${JSON.stringify({ updates: updates[i], savedAt: new Date().toISOString() })}\n`);
  });
  return dirs;
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'ckpt-integrity-'));
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('checkpoint integrity', () => {
  it('a whole checkpoint passes; a safetensors file cut anywhere does not', () => {
    const runDir = join(root, 'cut');
    const [dir] = writeCheckpoints(runDir, [1]);
    const file = join(dir, 'model.safetensors');
    expect(safetensorsProblem(file)).toBeUndefined();
    expect(listCheckpoints(runDir)).toEqual([{ dir, updates: 1 }]);
    const state = JSON.parse(readFileSync(join(dir, TRAINER_STATE_FILE), 'utf8'));
    expect(Object.keys(state)).toEqual(['updates', 'saved_at', 'files']);
    expect(camelCaseKeys(state, TRAINER_STATE_FILE)).toEqual([]);
    const size = statSync(file).size;
    for (const cut of [size - 1, size - 4 * 32, 100, 7]) {
      truncateSync(file, cut);
      expect(safetensorsProblem(file), `cut to ${cut} bytes`).toMatch(/bytes/);
    }
  });

  it('skips torn checkpoints for the newest whole one, naming both', () => {
    const runDir = join(root, 'resume');
    const [good, cut, noState, missing] = writeCheckpoints(runDir, [2, 3, 4, 5]);
    truncateSync(join(cut, 'model.safetensors'), 200);
    unlinkSync(join(noState, TRAINER_STATE_FILE));
    unlinkSync(join(missing, 'reference', 'reference.pt'));
    const lines: string[] = [];
    expect(latestCheckpoint(runDir, (l) => lines.push(l))).toEqual({ dir: good, updates: 2 });
    expect(lines).toEqual([
      `checkpoint ${cut} is torn (model.safetensors has 200 bytes, ${statSync(join(good, 'model.safetensors')).size} were written); resuming from ${good} instead`,
      `checkpoint ${noState} is torn (no ${TRAINER_STATE_FILE} (cut before it was written)); resuming from ${good} instead`,
      `checkpoint ${missing} is torn (reference/reference.pt is missing); resuming from ${good} instead`,
    ]);
    expect(listCheckpoints(runDir).map((c) => c.updates)).toEqual([2]);
  });

  it('checks the weights of a checkpoint written before sizes were recorded', () => {
    const runDir = join(root, 'legacy');
    const [old, newer] = writeCheckpoints(runDir, [1, 2], false);
    expect(listCheckpoints(runDir).map((c) => c.updates)).toEqual([1, 2]);
    truncateSync(join(newer, 'model.safetensors'), statSync(join(newer, 'model.safetensors')).size - 8);
    const lines: string[] = [];
    expect(latestCheckpoint(runDir, (l) => lines.push(l))?.dir).toBe(old);
    expect(lines[0]).toMatch(
      /update-000002 is torn \(model\.safetensors is cut \(\d+ bytes, its tensors need \d+\)\); resuming from .*update-000001 instead/,
    );
  });

  it('says a resume starts from the base model when no checkpoint is whole', () => {
    const runDir = join(root, 'none');
    const [only] = writeCheckpoints(runDir, [1]);
    unlinkSync(join(only, 'optimizer.pt'));
    const lines: string[] = [];
    expect(latestCheckpoint(runDir, (l) => lines.push(l))).toBeUndefined();
    expect(lines).toEqual([`checkpoint ${only} is torn (optimizer.pt is missing); resuming from the base model instead`]);
  });
});
