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
  /** Weight dtype. Default float32. */
  dtype?: Dtype;
  /** Mixed precision for forward passes (e.g. bfloat16 on CPU); null for none. */
  autocast?: Dtype | null;
  /** Keep a KL reference: a frozen copy, or with LoRA the base with adapters disabled. Default true. */
  reference?: boolean;
  /** Train LoRA adapters (PEFT) instead of all weights; absent: full fine-tuning. */
  lora?: LoraArgs | null;
  /** Recompute each block's activations in backward (less memory, ~30% more compute). Default true. */
  gradient_checkpointing?: boolean;
  /** Token positions per chunk of the output head in log-probability computation. Default 1024. */
  logprob_chunk?: number;
  /** Restore optimizer state and step from the dir's optimizer.pt when present. */
  resume?: boolean;
  seed?: number;
  optimizer?: Partial<OptimizerSettings>;
  /** A DeepSpeed config; when given, training runs under DeepSpeed. */
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
}

export interface TokenBatch {
  input_ids: number[][];
  /** Sequences per forward/backward pass; the loss is normalised over the whole request. */
  micro_batch_size?: number;
  /** Padded tokens (sequences x longest) per forward/backward pass; a longer sequence goes alone. */
  micro_batch_tokens?: number;
}

export interface SftStepArgs extends TokenBatch {
  mask: number[][];
  lr?: number;
}

export interface StepResult {
  loss: number;
  grad_norm: number | null;
  /** Generated (masked-in) tokens in the request. */
  tokens: number;
  /** Optimizer steps taken since the model was created. */
  step: number;
}

export interface GrpoStepArgs extends SftStepArgs {
  advantages: number[];
  /** Behaviour-policy log-probabilities; absent means on-policy (old = current policy). */
  old?: number[][];
  /** Reference log-probabilities; absent means the engine's frozen copy computes them. */
  ref?: number[][];
  loss?: LossSettingsInput;
  /** Sampling temperature the rollouts used; logits are divided by it. Default 1. */
  temperature?: number;
}

export type GrpoStepResult = StepResult & Omit<LossValues, 'loss'>;

export interface LogprobsArgs extends TokenBatch {
  temperature?: number;
  model?: 'policy' | 'reference';
}

export interface GradcheckResult {
  ok: boolean;
  checks: { name: string; ok: boolean; error?: string }[];
  model_parameters: number;
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
  save: { args: { dir: string }; result: { dir: string; step: number } };
  /** Greedy continuation by transformers' generate (stops at EOS); raw-distribution log-probabilities. */
  generate: {
    args: { input_ids: number[][]; max_new_tokens?: number; model?: 'policy' | 'reference' };
    result: { tokens: number[][]; logprobs: number[][] };
  };
  /** weights: the checkpoint layout (LoRA: the adapter alone, for vLLM); onnx: a full (merged) model dir + onnx/model.onnx (LoRA: the adapter in adapter/). */
  export: { args: { dir: string; format: 'onnx' | 'weights' }; result: { dir: string; step: number; onnx?: string } };
  /** Process memory in bytes: resident now and peak since the last reset; reset starts a new peak (CPU and CUDA). */
  memory: { args: { reset?: boolean }; result: { rss: number; peak_rss: number; cuda_allocated?: number; cuda_peak?: number } };
  loss: { args: LossBatch & { settings?: LossSettingsInput }; result: LossValues };
  gradcheck: { args: { seed?: number }; result: GradcheckResult };
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
  | { id: number | null; ok: false; error: string; traceback?: string };
