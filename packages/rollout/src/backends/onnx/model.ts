/**
 * Loads a causal LM exported to ONNX (optimum layout) from a Hugging Face model directory:
 * config.json for the KV-cache geometry, onnx/model.onnx (or model.onnx) for the graph. The
 * session's own input names tell whether the export has a KV cache and position ids. Beside
 * it, the trainer's export writes decode.onnx, a forward step on a shared-prefix cache
 * (engine/thinkfl_engine/onnx_decode.py), which the backend loads instead when it is there.
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

/** A forward step on a shared-prefix cache: names in cache order (layer, then key/value). */
export interface DecodeGraph {
  session: ort.InferenceSession;
  path: string;
  kvHeads: number;
  headDim: number;
  prefix: string[];
  suffix: string[];
  /** The step's own key/values, appended to each row's suffix. */
  fresh: string[];
}

/** Where the trainer's export puts the decode-step graph: beside the model's graph. */
const DECODE_FILE = 'decode.onnx';

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
    if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0)
      throw new Error(`${file}: ${key} must be a positive integer, got ${JSON.stringify(cfg[key])}`);
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
  /** Threads spin-wait for work between operators (onnxruntime's default, true) or sleep. */
  spin?: boolean;
}

function createSession(path: string, opts: SessionOptions): Promise<ort.InferenceSession> {
  return ort.InferenceSession.create(path, {
    intraOpNumThreads: opts.threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    extra: { session: { intra_op: { allow_spinning: opts.spin === false ? '0' : '1' } } },
  });
}

export async function loadOnnxCausalLM(onnxPath: string, cfg: ModelConfig, opts: SessionOptions): Promise<OnnxCausalLM> {
  const session = await createSession(onnxPath, opts);
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

/** The decode graph beside a model graph, if the export wrote one. */
export function decodeGraphPath(onnxPath: string): string | undefined {
  const path = join(dirname(onnxPath), DECODE_FILE);
  return existsSync(path) ? path : undefined;
}

export async function loadDecodeGraph(path: string, cfg: ModelConfig, opts: SessionOptions): Promise<DecodeGraph> {
  const session = await createSession(path, opts);
  const slots = Array.from({ length: cfg.layers }, (_, i) => ['key', 'value'].map((kv) => `${i}.${kv}`)).flat();
  const graph = {
    session,
    path,
    kvHeads: cfg.kvHeads,
    headDim: cfg.headDim,
    prefix: slots.map((s) => `prefix.${s}`),
    suffix: slots.map((s) => `suffix.${s}`),
    fresh: slots.map((s) => `new.${s}`),
  };
  const missingIn = ['input_ids', 'position_ids', 'prefix_mask', 'suffix_mask', ...graph.prefix, ...graph.suffix].filter(
    (n) => !session.inputNames.includes(n),
  );
  const missingOut = ['logits', ...graph.fresh].filter((n) => !session.outputNames.includes(n));
  if (missingIn.length + missingOut.length > 0) {
    await session.release();
    throw new Error(`${path}: not a decode-step graph for ${cfg.layers} layers (missing ${[...missingIn, ...missingOut].join(', ')})`);
  }
  return graph;
}

/** A graph's logits output, checked to be float32. */
export function logitsOf(result: ort.InferenceSession.ReturnType, graphPath: string): ort.Tensor {
  const logits = result.logits;
  if (logits.type !== 'float32') throw new Error(`${graphPath}: logits are ${logits.type}, expected float32`);
  return logits;
}
