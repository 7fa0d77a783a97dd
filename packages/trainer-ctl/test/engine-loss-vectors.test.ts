/**
 * The GRPO test vectors (engine/test-vectors/grpo.json, from a plain-Python formula script) and
 * hand-computed values, the oracle of the one loss implementation: the Python engine's `loss` op.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENGINE_DIR, ENGINE_PYTHON, TrainEngine, type LossArgs, type LossValues } from '../src/engine';
import type { LossSettingsInput } from '../src/algo/core/loss-settings';

type LossBatch = Omit<LossArgs, 'loss'>;

interface Case {
  name: string;
  settings: LossSettingsInput;
  inputs: LossBatch;
  expected: LossValues;
}
const vectors = JSON.parse(readFileSync(join(ENGINE_DIR, 'test-vectors', 'grpo.json'), 'utf8')) as {
  tolerance: number;
  cases: Case[];
};
const KEYS: (keyof LossValues)[] = ['loss', 'pg_loss', 'kl_loss', 'kl', 'clip_fraction', 'dual_clip_fraction', 'ratio_mean'];

/**
 * Hand-computed (issue 8 item 7): on-policy (ratio 1) so every generated token's pg term is -A.
 * Sequence 0 has 2 generated tokens and A = 1; sequence 1 has none. Dr.GRPO with L = 4:
 * sum = -2, B = 1 sequence with tokens, loss = -2 / (1 * 4) = -0.5 (counting the empty row: -0.25).
 */
const DR_GRPO_EMPTY_ROW: LossBatch = {
  logp: [
    [0, -0.5, -1],
    [0, -0.7],
  ],
  old: [
    [0, -0.5, -1],
    [0, -0.7],
  ],
  mask: [
    [0, 1, 1],
    [0, 0],
  ],
  advantages: [1, 2],
};
const DR_GRPO = { aggregation: 'seq-mean-token-sum-norm', norm_length: 4 } as const;
const GSPO_TOKEN_MEAN = { ratio_level: 'sequence', aggregation: 'token-mean' } as const;

function expectClose(got: LossValues, want: LossValues): void {
  for (const k of KEYS) expect(Math.abs(got[k] - want[k]), `${k}: got ${got[k]}, want ${want[k]}`).toBeLessThanOrEqual(vectors.tolerance);
}

describe('GRPO test vectors', () => {
  it('are what the committed plain-Python formula script produces', () => {
    execFileSync(ENGINE_PYTHON, [join(ENGINE_DIR, 'test-vectors', 'make_grpo_vectors.py'), '--check']);
  });

  it('cover every aggregation, estimator, dual clip and the GSPO ratio, with tolerance 1e-6', () => {
    expect(vectors.tolerance).toBe(1e-6);
    const s = vectors.cases.map((c) => c.settings);
    for (const agg of ['seq-mean-token-mean', 'seq-mean-token-sum-norm'] as const) expect(s.some((x) => x.aggregation === agg)).toBe(true);
    for (const est of ['k1', 'k2', 'k3'] as const) expect(s.some((x) => x.kl_estimator === est && (x.kl_coef ?? 0) > 0)).toBe(true);
    expect(s.some((x) => x.ratio_level === 'sequence')).toBe(true);
    expect(vectors.cases.some((c) => c.expected.dual_clip_fraction > 0)).toBe(true);
    expect(vectors.cases.every((c) => c.expected.clip_fraction > 0)).toBe(true);
  });

  describe('Python engine (loss op over stdio)', () => {
    let engine: TrainEngine;
    beforeAll(() => {
      engine = new TrainEngine();
    });
    afterAll(async () => {
      await engine.shutdown();
    });

    it.each(vectors.cases.map((c) => [c.name, c] as const))('matches %s', async (_name, c) => {
      expectClose(await engine.request('loss', { ...c.inputs, loss: c.settings }), c.expected);
    });

    it('rejects invalid settings with a clear error and keeps serving', async () => {
      const c = vectors.cases[0];
      await expect(engine.request('loss', { ...c.inputs, loss: { aggregation: 'seq-mean-token-sum-norm' } })).rejects.toThrow(
        /norm_length/,
      );
      await expect(engine.request('loss', { ...c.inputs, loss: { kl_coef: 0.1 } })).rejects.toThrow(/reference log-probabilities/);
      await expect(engine.request('loss', { ...c.inputs, mask: c.inputs.mask.slice(1) })).rejects.toThrow(/mask: 3 sequences, expected 4/);
      expectClose(await engine.request('loss', { ...c.inputs, loss: c.settings }), c.expected);
    });

    it('Dr.GRPO does not count a sequence without generated tokens (hand-computed -0.5)', async () => {
      const got = await engine.request('loss', { ...DR_GRPO_EMPTY_ROW, loss: DR_GRPO });
      expect(got.loss).toBeCloseTo(-0.5, 12);
      expect(got.ratio_mean).toBeCloseTo(1, 12);
    });

    it('refuses the GSPO sequence ratio with a token-level aggregation', async () => {
      const c = vectors.cases[0];
      await expect(engine.request('loss', { ...c.inputs, loss: GSPO_TOKEN_MEAN })).rejects.toThrow(/seq-mean-token-mean/);
    });
  });

  it('the vectors hold a sequence without generated tokens, so Dr.GRPO cases check its B', () => {
    expect(vectors.cases[0].inputs.mask.some((row) => row.every((m) => m === 0))).toBe(true);
  });
});
