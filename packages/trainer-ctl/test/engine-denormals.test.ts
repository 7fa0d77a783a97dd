/**
 * The engine flushes denormal floats to zero in every thread torch computes on (thinkfl_engine's
 * __init__): a trained model's attention has denormal probabilities, and an SFT step on them took
 * 1.89x the initial model's in float32 (scripts/bench/sft-denormals.py). The quotients are computed in
 * parallel, so a thread without the flush would leave some nonzero.
 */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { ENGINE_DIR, ENGINE_PYTHON } from '../src/engine';

/** Nonzero values of 2^20 quotients 1e-38 / 10 (each 1e-39, a denormal), computed on 2 threads after `setup`. */
function nonzeroQuotients(setup: string): number {
  const script = `${setup}
import torch
torch.set_num_threads(2)
x = torch.full((1 << 20,), 1e-38, dtype=torch.float32) / 10
print(int((x != 0).sum()))
`;
  const out = execFileSync(ENGINE_PYTHON, ['-c', script], { env: { ...process.env, PYTHONPATH: ENGINE_DIR }, encoding: 'utf8' });
  return Number(out.trim().split('\n').at(-1));
}

describe('engine denormals', () => {
  it('torch alone keeps denormal results; with the engine imported, every thread flushes them to zero', () => {
    expect(nonzeroQuotients('')).toBe(1 << 20);
    expect(nonzeroQuotients('import thinkfl_engine')).toBe(0);
  }, 120_000);
});
