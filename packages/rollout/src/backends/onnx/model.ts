/**
 * Loads a causal LM exported to ONNX (optimum layout) from a Hugging Face model directory:
 * config.json for the KV-cache geometry, onnx/model.onnx (or model.onnx) for the graph. The
 * session's own input names tell whether the export has a KV cache and position ids.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as ort from 'onnxruntime-node';

export interface CacheSlot {
  input: string;
  output: string;
}

export interface OnnxCausalLM {
  session: ort.InferenceSession;
  onnxPath: string;
  layers: number;
  kvHeads: number;
  headDim: number;
  /** Most positions the model can attend to (prompt + generated). */
  maxPositions: number;
  vocabSize: number;
  /** Past key/value inputs and the present outputs that feed them, in layer order; empty without a cache. */
  cache: CacheSlot[];
  hasPositionIds: boolean;
}

export interface ModelConfig {
  layers: number;
  kvHeads: number;
  headDim: number;
  maxPositions: number;
  vocabSize: number;
  eosIds: number[];
  padId: number;
}

/** Reads what generation needs from config.json (and generation_config.json when present). */
export function readModelConfig(modelDir: string): ModelConfig {
  const file = join(modelDir, 'config.json');
  if (!existsSync(file)) throw new Error(`${file}: not found (a model directory needs config.json)`);
  let cfg: Record<string, unknown>;
  try {
    cfg = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`${file}: not valid JSON (${(e as Error).message})`);
  }
  const gen = readOptionalJson(join(modelDir, 'generation_config.json'));
  const int = (key: string, fallback?: number): number => {
    const v = cfg[key] ?? fallback;
    if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) throw new Error(`${file}: ${key} must be a positive integer, got ${JSON.stringify(cfg[key])}`);
    return v;
  };
  const heads = int('num_attention_heads');
  const hidden = int('hidden_size');
  const eos = ids(gen.eos_token_id ?? cfg.eos_token_id);
  return {
    layers: int('num_hidden_layers'),
    kvHeads: int('num_key_value_heads', heads),
    headDim: int('head_dim', Math.floor(hidden / heads)),
    maxPositions: int('max_position_embeddings', 1 << 20),
    vocabSize: int('vocab_size'),
    eosIds: eos,
    padId: ids(gen.pad_token_id ?? cfg.pad_token_id)[0] ?? eos[0] ?? 0,
  };
}

function readOptionalJson(file: string): Record<string, unknown> {
  if (!existsSync(file)) return {};
  try {
    return JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`${file}: not valid JSON (${(e as Error).message})`);
  }
}

function ids(v: unknown): number[] {
  if (typeof v === 'number') return [v];
  if (Array.isArray(v)) return v.filter((x): x is number => typeof x === 'number');
  return [];
}

/** Where a LoRA policy directory (the adapter, for vLLM) keeps its merged model and ONNX export. */
export const MERGED_DIR = 'merged';

/**
 * The model directory of a policy directory: the directory itself, or for a LoRA adapter
 * (adapter_config.json, no config.json) the merged export the trainer writes beside it in merged/.
 */
export function policyModelDir(dir: string): string {
  if (existsSync(join(dir, 'config.json')) || !existsSync(join(dir, 'adapter_config.json'))) return dir;
  const merged = join(dir, MERGED_DIR);
  if (!existsSync(join(merged, 'config.json'))) {
    throw new Error(
      `${dir} is a LoRA adapter without its merged export in ${MERGED_DIR}/: the onnx backend needs the trainer's onnx export (generation.backend.policy_format: onnx)`,
    );
  }
  return merged;
}

/** The ONNX file of a model (or LoRA policy) directory, or the path itself when it names a file. */
export function locateOnnx(source: string): { onnxPath: string; modelDir: string } {
  if (existsSync(source) && statSync(source).isFile()) {
    const dir = dirname(source);
    return { onnxPath: source, modelDir: existsSync(join(dir, 'config.json')) ? dir : dirname(dir) };
  }
  const modelDir = policyModelDir(source);
  for (const rel of ['onnx/model.onnx', 'model.onnx']) {
    const p = join(modelDir, rel);
    if (existsSync(p)) return { onnxPath: p, modelDir };
  }
  throw new Error(`${modelDir}: no onnx/model.onnx or model.onnx found`);
}

export interface SessionOptions {
  /** Threads inside one operator; 0 lets onnxruntime choose. */
  threads: number;
}

export async function loadOnnxCausalLM(onnxPath: string, cfg: ModelConfig, opts: SessionOptions): Promise<OnnxCausalLM> {
  const session = await ort.InferenceSession.create(onnxPath, {
    intraOpNumThreads: opts.threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
  });
  const inputs = new Set(session.inputNames);
  for (const need of ['input_ids', 'attention_mask']) {
    if (!inputs.has(need)) {
      await session.release();
      throw new Error(`${onnxPath}: the graph has no '${need}' input (inputs: ${session.inputNames.join(', ')})`);
    }
  }
  const cache: CacheSlot[] = [];
  if (inputs.has('past_key_values.0.key')) {
    for (let i = 0; i < cfg.layers; i++) {
      for (const kv of ['key', 'value']) {
        const input = `past_key_values.${i}.${kv}`;
        const output = [`present.${i}.${kv}`, `present_key_values.${i}.${kv}`].find((o) => session.outputNames.includes(o));
        if (!inputs.has(input) || !output) {
          await session.release();
          throw new Error(`${onnxPath}: config says ${cfg.layers} layers but the graph lacks ${input} or its present output`);
        }
        cache.push({ input, output });
      }
    }
  }
  if (!session.outputNames.includes('logits')) {
    await session.release();
    throw new Error(`${onnxPath}: the graph has no 'logits' output`);
  }
  return {
    session,
    onnxPath,
    layers: cfg.layers,
    kvHeads: cfg.kvHeads,
    headDim: cfg.headDim,
    maxPositions: cfg.maxPositions,
    vocabSize: cfg.vocabSize,
    cache,
    hasPositionIds: inputs.has('position_ids'),
  };
}
