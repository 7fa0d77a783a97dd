/**
 * LoRA with PEFT in the real engine, on a tiny Llama: only adapter weights train, the KL reference
 * (the base with adapters disabled) equals the base model, the checkpoint is PEFT's layout and
 * resumes to the same policy, and the merged export computes what the adapter model computes.
 */
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TrainEngine } from '../src/engine';
import { TINY_CONFIG } from './engine-fixtures';

const CONFIG = TINY_CONFIG;
const LORA = { r: 4, alpha: 8, target_modules: ['q_proj', 'v_proj'] };
const IDS = [
  [1, 5, 6, 7, 8, 9, 10, 2],
  [1, 5, 11, 12, 13, 2],
];
const MASK = IDS.map((row) => row.map((_, t) => (t >= 3 ? 1 : 0)));

/** Tensor names in a .safetensors file (its JSON header). */
function safetensorNames(file: string): string[] {
  const buf = readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  return Object.keys(JSON.parse(buf.subarray(8, 8 + n).toString('utf8'))).filter((k) => k !== '__metadata__');
}

function maxDiff(a: number[][][], b: number[][][]): number {
  let worst = 0;
  a.forEach((seq, i) => seq.forEach((row, t) => row.forEach((v, k) => (worst = Math.max(worst, Math.abs(v - b[i][t][k]))))));
  return worst;
}

describe('LoRA (PEFT)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'engine-lora-'));
  const base = join(dir, 'base');
  const engine = new TrainEngine();
  let baseLogits: number[][][];

  beforeAll(async () => {
    await engine.request('create_tiny', { out_dir: base, config: CONFIG, seed: 2 });
    await engine.request('load', { model_dir: base });
    baseLogits = (await engine.request('logits', { input_ids: IDS })).logits;
  });
  afterAll(async () => {
    await engine.shutdown();
  });

  it('trains only the adapters; the reference equals the base; checkpoint and merged export agree', async () => {
    const loaded = await engine.request('load', { model_dir: base, seed: 0, lora: LORA, optimizer: { lr: 5e-2 } });
    // r x (in + out) per adapted layer: q_proj 32 -> 32, v_proj 32 -> 16, in 2 layers.
    expect(loaded).toMatchObject({ lora: true, trainable_parameters: 2 * (4 * (32 + 32) + 4 * (32 + 16)) });
    // B starts at 0: the adapted model is the base model.
    expect(maxDiff((await engine.request('logits', { input_ids: IDS })).logits, baseLogits)).toBeLessThan(1e-6);
    // Taken before any training, the reference (a copy of the adapter weights) is the base with adapters disabled.
    await engine.request('set_reference', { tag: 'grpo_start' });

    for (let i = 0; i < 3; i++)
      await engine.request('grpo_step', { input_ids: IDS, mask: MASK, advantages: [1, -1], loss: { kl_coef: 0.1 } });
    const trained = (await engine.request('logits', { input_ids: IDS })).logits;
    expect(maxDiff(trained, baseLogits)).toBeGreaterThan(1e-3);
    expect(maxDiff((await engine.request('logits', { input_ids: IDS, model: 'reference' })).logits, baseLogits)).toBeLessThan(1e-6);

    const ckpt = join(dir, 'ckpt');
    await engine.request('save', { dir: ckpt });
    expect(existsSync(join(ckpt, 'adapter_config.json'))).toBe(true);
    expect(existsSync(join(ckpt, 'model.safetensors'))).toBe(false);
    expect(existsSync(join(ckpt, 'config.json'))).toBe(false);
    const names = safetensorNames(join(ckpt, 'adapter_model.safetensors'));
    expect(names.length).toBe(2 * 2 * 2);
    expect(names.every((n) => /lora_[AB]/.test(n))).toBe(true);

    // The onnx export: the adapter (for vLLM) with the merged model and its ONNX graph beside it in merged/.
    const exported = await engine.request('export', { dir: join(dir, 'policy'), format: 'onnx' });
    expect(safetensorNames(join(dir, 'policy', 'adapter_model.safetensors')).sort()).toEqual(names.sort());
    expect(existsSync(join(dir, 'policy', 'config.json'))).toBe(false);
    expect(existsSync(join(dir, 'policy', 'merged', 'adapter_config.json'))).toBe(false);
    expect(exported.onnx).toBe(join(dir, 'policy', 'merged', 'onnx', 'model.onnx'));
    expect(existsSync(exported.onnx!)).toBe(true);

    // The checkpoint holds only adapters and reads the base from its dir again: the same policy
    // means the steps changed no base weight.
    const resumed = await engine.request('load', { model_dir: ckpt, lora: LORA, resume: true });
    expect(resumed).toMatchObject({ lora: true, step: 3, reference: 'grpo_start' });
    expect(maxDiff((await engine.request('logits', { input_ids: IDS })).logits, trained)).toBeLessThan(1e-5);
    expect(maxDiff((await engine.request('logits', { input_ids: IDS, model: 'reference' })).logits, baseLogits)).toBeLessThan(1e-6);

    await engine.request('load', { model_dir: join(dir, 'policy', 'merged') });
    expect(maxDiff((await engine.request('logits', { input_ids: IDS })).logits, trained)).toBeLessThan(1e-5);
  });
});

describe('LoRA KL reference taken after training', () => {
  const dir = mkdtempSync(join(tmpdir(), 'engine-lora-ref-'));
  const engine = new TrainEngine();
  afterAll(async () => {
    await engine.shutdown();
  });

  it('is the adapted policy at set_reference, unchanged by later steps, and gives KL 0 on the next step', async () => {
    const base = join(dir, 'base');
    await engine.request('create_tiny', { out_dir: base, config: CONFIG, seed: 3 });
    await engine.request('load', { model_dir: base, seed: 0, lora: LORA, optimizer: { lr: 5e-2 } });
    // SFT-like steps move the adapter away from the base first.
    for (let i = 0; i < 2; i++) await engine.request('sft_step', { input_ids: IDS, mask: MASK });
    const atReference = (await engine.request('logits', { input_ids: IDS })).logits;
    await engine.request('set_reference', { tag: 'grpo_start' });
    const first = await engine.request('grpo_step', { input_ids: IDS, mask: MASK, advantages: [1, -1], loss: { kl_coef: 0.1 } });
    expect(Math.abs(first.kl)).toBeLessThan(1e-6);
    const second = await engine.request('grpo_step', { input_ids: IDS, mask: MASK, advantages: [1, -1], loss: { kl_coef: 0.1 } });
    expect(second.kl).toBeGreaterThan(1e-6);
    expect(maxDiff((await engine.request('logits', { input_ids: IDS })).logits, atReference)).toBeGreaterThan(1e-3);
    expect(maxDiff((await engine.request('logits', { input_ids: IDS, model: 'reference' })).logits, atReference)).toBeLessThan(1e-6);
  });
});
