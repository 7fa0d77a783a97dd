/**
 * A freshly initialised tiny model directory for tests (tokenizer fitted to the Nezha dataset,
 * onnx/model.onnx), made by scripts/create-tiny-model.ts at a small size with grouped KV heads:
 * a Llama, or a Qwen2 (q/k/v biases).
 *
 * The script writes the same bytes for the same arguments (seed included) wherever it writes, so
 * each model is made once into .cache/tiny-models, keyed by its arguments and by the sources and
 * pins it is made from, and copied to each test's dir: a test suite makes about 30 of these, at
 * 5-7 s of Python start, engine and ONNX export each.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { sourceHash, withLock } from './build-cache';
import { NEZHA_DATASET, REPO_ROOT } from './nezha';

/** What a tiny model is made from besides its arguments: the script, the engine and its pins, the tokenizer fit, the dataset. */
const SOURCES = [
  'scripts/create-tiny-model.ts',
  'engine/thinkfl_engine',
  'engine/requirements.txt',
  'packages/rollout/src/chat',
  'packages/trainer-ctl/src/engine',
];

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
  const key = createHash('sha1').update(JSON.stringify(args));
  for (const src of SOURCES) key.update(sourceHash(join(REPO_ROOT, src)));
  for (const part of ['meta.json', 'code-fingerprint.txt']) key.update(readFileSync(join(NEZHA_DATASET, part)));
  const cached = join(REPO_ROOT, '.cache', 'tiny-models', key.digest('hex'));
  mkdirSync(join(REPO_ROOT, '.cache', 'tiny-models'), { recursive: true });
  await withLock(
    `${cached}.lock`,
    () => existsSync(cached),
    async () => {
      const tmp = `${cached}.tmp-${process.pid}`;
      rmSync(tmp, { recursive: true, force: true });
      const script = join(REPO_ROOT, 'scripts', 'create-tiny-model.ts');
      await promisify(execFile)(process.execPath, ['--import', 'tsx', script, '--out', tmp, ...args], { cwd: REPO_ROOT });
      renameSync(tmp, cached);
    },
  );
  cpSync(cached, outDir, { recursive: true });
  return outDir;
}
