/**
 * The GPU smoke (issue 24) runs in CI as written for a bare GPU machine, on the tiny shape and
 * the CPU: `python scripts/gpu/engine_smoke.py --shape tiny --device cpu`, with the engine's
 * Python. Every mode and step kind reports a finite loss and gradient norm, a throughput and a
 * peak memory; LoRA trains only its adapters; no MFU without a known peak (a CPU has none).
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { ENGINE_PYTHON } from '../../packages/trainer-ctl/src/engine/driver';
import { REPO_ROOT } from '../../testkit/nezha';

interface Row {
  mode: string;
  step: string;
  ranks: number;
  parameters: number;
  trainable_parameters: number;
  batch: number;
  tokens_per_sequence: number;
  step_s: number;
  tokens_per_s: number;
  peak_memory_gib_per_rank: number;
  mfu: number | null;
  loss: number;
  grad_norm: number;
}

it('python scripts/gpu/engine_smoke.py --shape tiny --device cpu: SFT and GRPO steps, full and LoRA, with figures', async () => {
  const { stdout } = await promisify(execFile)(
    ENGINE_PYTHON,
    [join('scripts', 'gpu', 'engine_smoke.py'), '--shape', 'tiny', '--device', 'cpu'],
    {
      cwd: REPO_ROOT,
      maxBuffer: 1 << 24,
    },
  );
  const rows = stdout
    .split('\n')
    .filter((l) => l.startsWith('{') && l.includes('"step"'))
    .map((l) => JSON.parse(l) as Row);
  expect(rows.map((r) => `${r.mode}/${r.step}/${r.ranks}`)).toEqual(['full/sft/1', 'full/grpo/1', 'lora/sft/1', 'lora/grpo/1']);
  for (const r of rows) {
    expect(Number.isFinite(r.loss) && Number.isFinite(r.grad_norm) && r.grad_norm > 0, `${r.mode} ${r.step}`).toBe(true);
    // The whole batch's tokens per second of a step (step_s is rounded to 0.1 ms).
    expect(Math.abs(r.tokens_per_s * r.step_s - r.batch * r.tokens_per_sequence)).toBeLessThan(0.01 * r.batch * r.tokens_per_sequence);
    expect(r.peak_memory_gib_per_rank).toBeGreaterThan(0);
    expect(r.mfu).toBeNull();
  }
  const [full, lora] = [rows[0], rows[2]];
  expect(full.trainable_parameters).toBe(full.parameters);
  expect(lora.trainable_parameters).toBeGreaterThan(0);
  expect(lora.parameters - lora.trainable_parameters).toBe(full.parameters);
  // SFT's cross-entropy of a random-init model is about ln(vocab): the loss is the model's, not a constant.
  expect(Math.abs(full.loss - Math.log(1024))).toBeLessThan(0.5);
}, 600_000);
