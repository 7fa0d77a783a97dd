/**
 * A freshly initialised tiny model directory for tests (tokenizer fitted to the Nezha dataset,
 * onnx/model.onnx), made by scripts/create-tiny-model.ts at a small size with grouped KV heads:
 * a Llama, or a Qwen2 (q/k/v biases).
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { NEZHA_DATASET, REPO_ROOT } from './nezha';

/** The layout of the smallest models the tests create directly through the engine's create_tiny: 2 layers, grouped KV heads. */
export const SMALL_LAYOUT = {
  hidden_size: 32,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 8,
  intermediate_size: 64,
};

export async function createTinyModel(outDir: string, seed = 0, architecture: 'llama' | 'qwen2' = 'llama'): Promise<string> {
  const args = [
    '--dataset',
    NEZHA_DATASET,
    '--out',
    outDir,
    '--seed',
    String(seed),
    '--architecture',
    architecture,
    '--hidden-size',
    '64',
    '--layers',
    '2',
    '--heads',
    '4',
    '--kv-heads',
    '2',
    '--head-dim',
    '16',
    '--intermediate-size',
    '128',
  ];
  await promisify(execFile)(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'scripts', 'create-tiny-model.ts'), ...args], {
    cwd: REPO_ROOT,
  });
  return outDir;
}
