/**
 * DeepSpeed ZeRO-2 and ZeRO-3 with 2 ranks on CPU (gloo), started by torchrun and driven through
 * rank 0's stdio: the SFT loss trajectory of a tiny Llama matches single-process training (bf16
 * weights and compute with fp32 master weights against fp32 weights with bf16 autocast: within 2%
 * of the loss), and the saved 16-bit model loads with transformers and computes the same
 * log-probabilities as the engine that saved it.
 */
import { existsSync, mkdtempSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TrainEngine } from '../src/engine';
import { RAGGED_IDS, TINY_CONFIG } from './engine-fixtures';

const CONFIG = TINY_CONFIG;
const IDS = RAGGED_IDS;
const MASK = IDS.map((row) => row.map((_, t) => (t >= 2 ? 1 : 0)));
const STEPS = 4;
const OPTIMIZER = { lr: 2e-2 };

/** SFT losses over STEPS steps, in micro-batches of microBatchSize sequences. */
async function trajectory(engine: TrainEngine, microBatchSize: number): Promise<number[]> {
  const losses: number[] = [];
  for (let i = 0; i < STEPS; i++)
    losses.push((await engine.request('sft_step', { input_ids: IDS, mask: MASK, micro_batch_size: microBatchSize })).loss);
  return losses;
}

const dir = mkdtempSync(join(tmpdir(), 'engine-deepspeed-'));
const base = join(dir, 'base');
let single: number[];

beforeAll(async () => {
  const engine = new TrainEngine();
  try {
    await engine.request('create_tiny', { out_dir: base, config: CONFIG, seed: 3 });
    await engine.request('load', { model_dir: base, seed: 0, optimizer: OPTIMIZER, autocast: 'bfloat16' });
    single = await trajectory(engine, 2);
  } finally {
    await engine.shutdown();
  }
  // The trajectory moves: matching it is not matching a constant.
  expect(single[STEPS - 1]).toBeLessThan(0.9 * single[0]);
});

describe.each([2, 3])('ZeRO-%i with 2 ranks on CPU', (stage) => {
  const engine = new TrainEngine({ ranks: 2 });
  afterAll(async () => {
    await engine.shutdown();
  });

  it('follows the single-process loss trajectory and saves a model transformers loads', async () => {
    const loaded = await engine.request('load', {
      model_dir: base,
      seed: 0,
      optimizer: OPTIMIZER,
      deepspeed: { zero_optimization: { stage }, bf16: { enabled: true } },
    });
    expect(loaded.step).toBe(0);
    const losses = await trajectory(engine, 2);
    losses.forEach((l, i) => expect(Math.abs(l - single[i])).toBeLessThan(0.02 * single[i]));

    const saved = join(dir, `zero${stage}`);
    await engine.request('save', { dir: saved });
    expect(existsSync(join(saved, 'model.safetensors'))).toBe(true);
    const ours = (await engine.request('logprobs', { input_ids: IDS })).logprobs;
    const plain = new TrainEngine();
    try {
      const reloaded = await plain.request('load', { model_dir: saved, dtype: 'bfloat16' });
      expect(reloaded.parameters).toBe(loaded.parameters);
      const theirs = (await plain.request('logprobs', { input_ids: IDS })).logprobs;
      // DeepSpeed computes in bf16 throughout (its residual stream too); the reloaded model keeps fp32
      // weights and runs under bf16 autocast (norms, softmax and residual adds in fp32), so they
      // agree to bf16 rounding accumulated over the layers, not to float32 precision: measured
      // 0.0012-0.0128 (the trained weights vary a little between runs); a wrong or stale weight
      // file moves log-probabilities by far more (the trajectory's loss fell by over 10%).
      theirs.forEach((row, i) =>
        row.forEach((v, t) => expect(Math.abs(v - ours[i][t])).toBeLessThan(2 ** -5 * Math.max(1, Math.abs(ours[i][t])))),
      );
    } finally {
      await plain.shutdown();
    }
  });
});

describe('a DeepSpeed config in an engine started without a launcher', () => {
  it('sets up a one-rank process group itself (no MPI discovery) and trains', async () => {
    let logs = '';
    const engine = new TrainEngine({ onStderr: (t) => (logs += t) });
    try {
      const loaded = await engine.request('load', {
        model_dir: base,
        seed: 0,
        optimizer: OPTIMIZER,
        deepspeed: { zero_optimization: { stage: 2 } },
      });
      expect(loaded.ranks).toBe(1);
      const step = await engine.request('sft_step', { input_ids: IDS, mask: MASK, micro_batch_size: 2 });
      expect(Number.isFinite(step.loss)).toBe(true);
      expect(logs).not.toMatch(/mpi4py|MPI environment/);
    } finally {
      await engine.shutdown();
    }
  });

  it('checkpoints a LoRA run without its frozen base, and resumes from that checkpoint', async () => {
    const lora = { r: 2, alpha: 4, target_modules: ['q_proj', 'v_proj'] };
    const deepspeed = { zero_optimization: { stage: 2 } };
    const saved = join(dir, 'lora-zero2');
    const engine = new TrainEngine();
    let before: number[][];
    let next: number;
    try {
      await engine.request('load', { model_dir: base, seed: 0, optimizer: OPTIMIZER, lora, deepspeed });
      await trajectory(engine, 2);
      await engine.request('save', { dir: saved });
      before = (await engine.request('logprobs', { input_ids: IDS })).logprobs;
      next = (await engine.request('sft_step', { input_ids: IDS, mask: MASK, micro_batch_size: 2 })).loss;
    } finally {
      await engine.shutdown();
    }
    // DeepSpeed's module state holds the adapter alone: far below the base model's weights, which it held before.
    const states = statSync(join(saved, 'deepspeed', 'engine', 'mp_rank_00_model_states.pt')).size;
    const baseWeights = statSync(join(base, 'model.safetensors')).size;
    expect(states).toBeLessThan(baseWeights / 4);
    const resumed = new TrainEngine();
    try {
      const loaded = await resumed.request('load', { model_dir: saved, seed: 0, optimizer: OPTIMIZER, lora, deepspeed, resume: true });
      expect(loaded.step).toBe(STEPS);
      const after = (await resumed.request('logprobs', { input_ids: IDS })).logprobs;
      after.forEach((row, i) => row.forEach((v, t) => expect(Math.abs(v - before[i][t])).toBeLessThan(1e-6)));
      // The optimizer state came back with it: the next step is the one the saving engine made.
      const again = (await resumed.request('sft_step', { input_ids: IDS, mask: MASK, micro_batch_size: 2 })).loss;
      expect(Math.abs(again - next)).toBeLessThan(1e-6);
    } finally {
      await resumed.shutdown();
    }
  });
});
