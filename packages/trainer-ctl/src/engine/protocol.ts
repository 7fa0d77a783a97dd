/**
 * The engine's stdio line protocol: request {id, op, args} -> response {id, ok, result | error}.
 * Per-token arrays are aligned with the token ids of their sequence; position 0 has no
 * prediction (its log-probability is 0 and its mask must be 0). Non-finite numbers come back as null.
 */
import type { LossBatch, LossValues } from './loss-reference';
import type { LossSettingsInput } from './loss-settings';
import type { OptimizerSettings } from './optimizer-settings';
import type { TinyModelConfig } from './tiny-model-config';

export type Dtype = 'float32' | 'float64' | 'bfloat16' | 'float16';

export interface LoadArgs {
  /** A model dir in the Hugging Face layout (any transformers causal LM), or a LoRA checkpoint (adapter_config.json naming its base dir). */
  model_dir: string;
  /** torch device, e.g. 'cpu', 'cuda', 'cuda:1'. Default 'cpu'. */
  device?: string;
  /**
   * Compute precision of forward and backward (torch.autocast below float32). Parameters and
   * optimizer state stay float32 master weights (float64 when this is float64). Default float32.
   */
  dtype?: Dtype;
  /**
   * Overrides dtype as the compute precision. 'auto' on CPU times training passes of the loaded
   * model in float32 and bfloat16 (interleaved, the fastest of autocast_probe.reps each) and takes the
   * faster; on CUDA bfloat16 where supported, else float32. null: dtype.
   */
  autocast?: Dtype | 'auto' | null;
  /**
   * Directory of the 'auto' measurements, one file per key (CPU model and flags, torch version,
   * model shape, LoRA, checkpointing, threads, probe length): a key found there is not measured
   * again. null or absent: measure at every load.
   */
  autocast_cache?: string | null;
  /** The 'auto' measurement: sequence length in tokens (default 1024) and timed passes per precision (default 5). */
  autocast_probe?: { tokens?: number; reps?: number };
  /** torch threads. Default: every core this process may run on (its CPU affinity). */
  threads?: number | null;
  /** Train LoRA adapters (PEFT) instead of all weights; absent: full fine-tuning. */
  lora?: LoraArgs | null;
  /** Recompute each block's activations in backward (less memory, ~30% more compute). Default true. */
  gradient_checkpointing?: boolean;
  /** Token positions per chunk of the output head in log-probability computation. Default 1024. */
  logprob_chunk?: number;
  /**
   * Restore optimizer state, step and the optimizer's tag from the dir's optimizer.pt (DeepSpeed:
   * its deepspeed/ dir), and the KL reference from its reference/ dir, when present.
   */
  resume?: boolean;
  seed?: number;
  optimizer?: Partial<OptimizerSettings>;
  /**
   * A DeepSpeed config; when given, training runs under DeepSpeed. The engine joins its launcher's
   * process group (EngineOptions.distributed), or sets up a one-rank group itself without one.
   */
  deepspeed?: Record<string, unknown> | null;
}

/** LoRA (Hu et al. 2021): W + (alpha / r) B A on the target linear layers. */
export interface LoraArgs {
  r: number;
  alpha: number;
  dropout?: number;
  /** Linear layers to adapt, by module name (e.g. q_proj, v_proj); lm_head cannot be. */
  target_modules?: string[];
}

export interface LoadResult {
  /** config.json's model_type, e.g. 'llama', 'qwen2'. */
  kind: string;
  parameters: number;
  /** Parameters the optimizer updates (only the adapters with LoRA). */
  trainable_parameters: number;
  lora: boolean;
  device: string;
  step: number;
  /** The compute precision in effect. */
  compute_dtype: Dtype;
  /** Why that precision (for 'auto' on CPU: both measured times and whether they came from the cache). */
  precision: string;
  threads: number;
  /** Tag of the KL reference policy held (restored on resume), or null when there is none. */
  reference: string | null;
  /** Tag of the last reset_optimizer the optimizer state dates from (restored on resume); null: from the load. */
  optimizer: string | null;
  /** Engine processes; each runs its share of a request's micro-batches. */
  ranks: number;
}

/**
 * A token-batch file (queue/step-file.ts) the engine memory-maps instead of inline arrays; it
 * checks the SHA-256 first. Its columns fill input_ids, mask, advantages and old.
 */
export interface BatchFileArg {
  path: string;
  bytes: number;
  sha256: string;
  /** Rows [from, to) of the file; default all. */
  row_range?: [number, number];
}

export interface TokenBatch {
  /** Inline token ids; absent when `batch` names a file. */
  input_ids?: number[][];
  batch?: BatchFileArg;
  /** Sequences per forward/backward pass; the loss is normalised over the whole request. */
  micro_batch_size?: number;
  /** Padded tokens (sequences x longest) per forward/backward pass; a longer sequence goes alone. */
  micro_batch_tokens?: number;
}

export interface SftStepArgs extends TokenBatch {
  mask?: number[][];
  lr?: number;
  /** Return every trainable weight's whole gradient (averaged over the ranks, before clipping): for checking data parallelism. */
  gradients?: boolean;
}

export interface StepResult {
  loss: number;
  grad_norm: number | null;
  /** Generated (masked-in) tokens in the request. */
  tokens: number;
  /** Optimizer steps taken since the model was created. */
  step: number;
  /** With `gradients: true`: weight name (transformers' own) -> its flattened gradient. */
  gradients?: Record<string, number[]>;
}

export interface GrpoStepArgs extends SftStepArgs {
  /** One per sequence; from the file when `batch` is given. */
  advantages?: number[];
  /** Behaviour-policy log-probabilities; absent means on-policy (old = current policy). */
  old?: number[][];
  /** Reference log-probabilities; absent means the engine's reference policy (set_reference) computes them. */
  ref?: number[][];
  loss?: LossSettingsInput;
  /**
   * Sampling temperature of each sequence (or one for all): log-probabilities are those of
   * softmax(logits / T), the distribution the rollout sampled from. Default 1.
   */
  temperature?: number | number[];
}

export type GrpoStepResult = StepResult & Omit<LossValues, 'loss'>;

export interface LogprobsArgs extends TokenBatch {
  /** Temperature of each sequence (or one for all), as in GrpoStepArgs. Default 1. */
  temperature?: number | number[];
  model?: 'policy' | 'reference';
}

export interface GradcheckResult {
  ok: boolean;
  checks: { name: string; ok: boolean; error?: string }[];
  model_parameters: number;
}

export interface BatchStats {
  sha256: string;
  bytes: number;
  rows: number;
  tokens: number;
  ids_sum: number;
  masked_tokens: number;
  max_row_tokens: number;
  masked_logprob_sum?: number;
  advantage_sum?: number;
}

/** Every op: its args and result types. */
export interface EngineOps {
  info: { args: Record<string, never>; result: { python: string; torch: string; cuda: boolean; loaded: boolean } };
  create_tiny: { args: { out_dir: string; config: TinyModelConfig; seed?: number }; result: { parameters: number } };
  load: { args: LoadArgs; result: LoadResult };
  logprobs: { args: LogprobsArgs; result: { logprobs: number[][] } };
  logits: { args: { input_ids: number[][]; model?: 'policy' | 'reference' }; result: { logits: number[][][] } };
  sft_step: { args: SftStepArgs; result: StepResult };
  grpo_step: { args: GrpoStepArgs; result: GrpoStepResult };
  /**
   * Freezes the current policy as the KL reference, named by tag (e.g. the stage it was taken at):
   * a frozen copy, or with LoRA a copy of the adapter weights (the base is shared).
   */
  set_reference: { args: { tag: string }; result: { reference: string; step: number } };
  /**
   * A new optimizer (no moments, step count 0) named by tag, e.g. the GRPO stage it starts
   * (grpo.optimizer.reset); the tag is saved with checkpoints and restored on resume.
   */
  reset_optimizer: { args: { tag: string }; result: { optimizer: string; step: number } };
  /** Weights (LoRA: the adapter), optimizer state and the reference policy (reference/) into dir. */
  save: { args: { dir: string }; result: { dir: string; step: number; reference: string | null; optimizer: string | null } };
  /** Greedy continuation by transformers' generate (stops at EOS); raw-distribution log-probabilities. */
  generate: {
    args: { input_ids: number[][]; max_new_tokens?: number; model?: 'policy' | 'reference' };
    result: { tokens: number[][]; logprobs: number[][] };
  };
  /** weights: the checkpoint layout (LoRA: the adapter alone, for vLLM); onnx: a full model dir + onnx/model.onnx (LoRA: the adapter, and the merged model dir with onnx/ in merged/). */
  export: { args: { dir: string; format: 'onnx' | 'weights' }; result: { dir: string; step: number; onnx?: string; /** The decode-step graph beside onnx (Llama, Qwen2). */ decode_onnx?: string } };
  /** Process memory in bytes: resident now and peak since the last reset; reset starts a new peak (CPU and CUDA). */
  memory: { args: { reset?: boolean }; result: { rss: number; peak_rss: number; cuda_allocated?: number; cuda_peak?: number } };
  loss: { args: LossBatch & { settings?: LossSettingsInput }; result: LossValues };
  gradcheck: { args: { seed?: number }; result: GradcheckResult };
  /** Checks a token-batch file and sums its columns: the bulk data path without training. */
  batch_stats: { args: { batch: BatchFileArg }; result: BatchStats };
  shutdown: { args: Record<string, never>; result: { bye: true } };
}

export type EngineOp = keyof EngineOps;

export interface EngineRequest {
  id: number;
  op: EngineOp;
  args: unknown;
}

export type EngineResponse =
  | { id: number | null; ok: true; result: unknown }
  | { id: number | null; ok: false; error: string; traceback?: string; /** The engine cannot go on (a lost peer rank) and exits. */ fatal?: boolean };
