/**
 * The engine's stdio line protocol: request {id, op, args} -> response {id, ok, result | error}.
 * Each op's args and result are defined here once, in zod; `engineProtocolJsonSchema()` exports
 * them to engine/thinkfl_engine/protocol.schema.json, from which the Python engine validates
 * every request (protocol.py). Per-token arrays are aligned with the token ids of their sequence;
 * position 0 has no prediction (its log-probability is 0 and its mask must be 0). Non-finite
 * numbers come back as null. Checks that relate values to each other or to the model (lengths,
 * the vocabulary, the first mask position) are the engine's own.
 */
import { z } from 'zod';
import { LossSettingsSchema } from '../algo/core/loss-settings';
import { OptimizerSettingsSchema } from '../algo/core/optimizer-settings';
import { TinyModelConfigSchema } from './tiny-model-config';

const Dtype = z.enum(['float32', 'float64', 'bfloat16', 'float16']);
export type Dtype = z.infer<typeof Dtype>;
const ModelName = z
  .enum(['policy', 'reference'])
  .describe("Which model runs: the policy, or the KL reference (set_reference). Default 'policy'.");
const TokenIds = z.array(z.array(z.number().int().min(0))).describe('Token ids, one list per sequence.');
const PerToken = z.array(z.array(z.number())).describe('One value per token id, one list per sequence.');
const Mask = z.array(z.array(z.number())).describe('1 where the token is trained on (generated), else 0, per token id.');
const Temperature = z
  .union([z.number(), z.array(z.number())])
  .describe('Sampling temperature of each sequence (or one for all): log-probabilities are those of softmax(logits / T). Default 1.');
const Empty = z.object({}).strict();
const Tag = z.string().min(1);

/** LoRA (Hu et al. 2021): W + (alpha / r) B A on the target linear layers. */
const LoraArgs = z
  .object({
    r: z.number().int().positive(),
    alpha: z.number(),
    dropout: z.number().min(0).lt(1).optional(),
    /** Linear layers to adapt, by module name (e.g. q_proj, v_proj); lm_head cannot be. */
    target_modules: z.array(z.string()).min(1).optional(),
  })
  .strict();
export type LoraArgs = z.input<typeof LoraArgs>;

const LoadArgs = z
  .object({
    /** A model dir in the Hugging Face layout (any transformers causal LM), or a LoRA checkpoint (adapter_config.json naming its base dir). */
    model_dir: z.string(),
    /** torch device, e.g. 'cpu', 'cuda', 'cuda:1'. Default 'cpu'. */
    device: z.string().optional(),
    /**
     * Compute precision of forward and backward (torch.autocast below float32). Parameters and
     * optimizer state stay float32 master weights (float64 when this is float64). Default float32.
     */
    dtype: Dtype.optional(),
    /**
     * Overrides dtype as the compute precision. 'auto' on CPU times training passes of the loaded
     * model in float32 and bfloat16 (interleaved, the fastest of autocast_probe.reps each) and takes the
     * faster; on CUDA bfloat16 where supported, else float32. null: dtype.
     */
    autocast: z
      .union([Dtype, z.literal('auto')])
      .nullable()
      .optional(),
    /**
     * Directory of the 'auto' measurements, one file per key (CPU model and flags, torch version,
     * kernel-choosing environment such as ONEDNN_MAX_CPU_ISA, model shape, LoRA, checkpointing,
     * threads, probe length): a key found there is not measured
     * again. null or absent: measure at every load.
     */
    autocast_cache: z.string().nullable().optional(),
    /** The 'auto' measurement: sequence length in tokens (default 1024) and timed passes per precision (default 5). */
    autocast_probe: z
      .object({ tokens: z.number().int().positive().optional(), reps: z.number().int().positive().optional() })
      .strict()
      .optional(),
    /** torch threads. Default: every core this process may run on (its CPU affinity). */
    threads: z.number().int().positive().nullable().optional(),
    /** Train LoRA adapters (PEFT) instead of all weights; absent: full fine-tuning. */
    lora: LoraArgs.nullable().optional(),
    /** Recompute each block's activations in backward (less memory, ~30% more compute). Default true. */
    gradient_checkpointing: z.boolean().optional(),
    /** Token positions per chunk of the output head in log-probability computation. Default 1024. */
    logprob_chunk: z.number().int().positive().optional(),
    /**
     * Restore optimizer state, step and the optimizer's tag from the dir's optimizer.pt (DeepSpeed:
     * its deepspeed/ dir), and the KL reference from its reference/ dir, when present.
     */
    resume: z.boolean().optional(),
    seed: z.number().int().optional(),
    optimizer: OptimizerSettingsSchema.partial().optional(),
    /**
     * A DeepSpeed config; when given, training runs under DeepSpeed. The engine joins its launcher's
     * process group (EngineOptions.distributed), or sets up a one-rank group itself without one.
     */
    deepspeed: z.record(z.string(), z.unknown()).nullable().optional(),
  })
  .strict();
export type LoadArgs = z.input<typeof LoadArgs>;

const LoadResult = z
  .object({
    /** config.json's model_type, e.g. 'llama', 'qwen2'. */
    kind: z.string(),
    parameters: z.number().int(),
    /** Parameters the optimizer updates (only the adapters with LoRA). */
    trainable_parameters: z.number().int(),
    lora: z.boolean(),
    device: z.string(),
    step: z.number().int(),
    /** The compute precision in effect. */
    compute_dtype: Dtype,
    /** Why that precision (for 'auto' on CPU: both measured times and whether they came from the cache). */
    precision: z.string(),
    threads: z.number().int(),
    /** Tag of the KL reference policy held (restored on resume), or null when there is none. */
    reference: z.string().nullable(),
    /** Tag of the last reset_optimizer the optimizer state dates from (restored on resume); null: from the load. */
    optimizer: z.string().nullable(),
    /** Engine processes; each runs its share of a request's micro-batches. */
    ranks: z.number().int(),
  })
  .strict();
export type LoadResult = z.output<typeof LoadResult>;

/**
 * A token-batch file (queue/step-file.ts) the engine memory-maps instead of inline arrays; it
 * checks the SHA-256 first. Its columns fill input_ids, mask, advantages and old.
 */
const BatchFileArg = z
  .object({
    path: z.string(),
    bytes: z.number().int().min(0),
    sha256: z.string(),
    /** Rows [from, to) of the file; default all. */
    row_range: z.tuple([z.number().int().min(0), z.number().int().min(0)]).optional(),
  })
  .strict();
export type BatchFileArg = z.input<typeof BatchFileArg>;

const tokenBatch = {
  /** Inline token ids; absent when `batch` names a file. */
  input_ids: TokenIds.optional(),
  batch: BatchFileArg.optional(),
  /** Sequences per forward/backward pass; the loss is normalised over the whole request. */
  micro_batch_size: z.number().int().positive().nullable().optional(),
  /** Padded tokens (sequences x longest) per forward/backward pass; a longer sequence goes alone. */
  micro_batch_tokens: z.number().int().positive().nullable().optional(),
};
export type TokenBatch = z.input<z.ZodObject<typeof tokenBatch>>;

const sftStep = {
  ...tokenBatch,
  mask: Mask.optional(),
  lr: z.number().positive().nullable().optional(),
  /** Return every trainable weight's whole gradient (averaged over the ranks, before clipping): for checking data parallelism. */
  gradients: z.boolean().optional(),
};
const SftStepArgs = z.object(sftStep).strict();
export type SftStepArgs = z.input<typeof SftStepArgs>;

const stepResult = {
  loss: z.number(),
  grad_norm: z.number().nullable(),
  /** Generated (masked-in) tokens in the request. */
  tokens: z.number().int(),
  /** Optimizer steps taken since the model was created. */
  step: z.number().int(),
  /** With `gradients: true`: weight name (transformers' own) -> its flattened gradient. */
  gradients: z.record(z.string(), z.array(z.number())).optional(),
};
const StepResult = z.object(stepResult).strict();
export type StepResult = z.output<typeof StepResult>;

const GrpoStepArgs = z
  .object({
    ...sftStep,
    /** One per sequence; from the file when `batch` is given. */
    advantages: z.array(z.number()).optional(),
    /** Behaviour-policy log-probabilities; absent means on-policy (old = current policy). */
    old: PerToken.nullable().optional(),
    /** Reference log-probabilities; absent means the engine's reference policy (set_reference) computes them. */
    ref: PerToken.nullable().optional(),
    loss: LossSettingsSchema.optional(),
    temperature: Temperature.optional(),
  })
  .strict();
export type GrpoStepArgs = z.input<typeof GrpoStepArgs>;

/** The GRPO loss and its parts (engine/thinkfl_engine/grpo_loss.py). */
const lossValues = {
  loss: z.number(),
  pg_loss: z.number(),
  kl_loss: z.number(),
  /** Token-mean of the chosen KL estimator (0 without a KL term). */
  kl: z.number(),
  /** Fraction of generated tokens whose clipped surrogate was the active branch. */
  clip_fraction: z.number(),
  /** Fraction of generated tokens capped by the dual clip. */
  dual_clip_fraction: z.number(),
  /** Token-mean of the importance ratio pi/pi_old; exactly 1 on the first update of on-policy data. */
  ratio_mean: z.number(),
};
const LossValues = z.object(lossValues).strict();
export type LossValues = z.output<typeof LossValues>;
const GrpoStepResult = z.object({ ...stepResult, ...lossValues }).strict();
export type GrpoStepResult = z.output<typeof GrpoStepResult>;

const LogprobsArgs = z.object({ ...tokenBatch, temperature: Temperature.optional(), model: ModelName.optional() }).strict();
export type LogprobsArgs = z.input<typeof LogprobsArgs>;

/** The `loss` op: the loss math alone on given per-token values (float64), for the test vectors. */
const LossArgs = z
  .object({
    /** Current policy log-probabilities. */
    logp: PerToken,
    old: PerToken,
    /** Reference-model log-probabilities; needed when kl_coef > 0. */
    ref: PerToken.nullable().optional(),
    mask: Mask,
    /** One advantage per sequence. */
    advantages: z.array(z.number()),
    loss: LossSettingsSchema.optional(),
  })
  .strict();
export type LossArgs = z.input<typeof LossArgs>;

const GradcheckResult = z
  .object({
    ok: z.boolean(),
    checks: z.array(z.object({ name: z.string(), ok: z.boolean(), error: z.string().optional() }).strict()),
    model_parameters: z.number().int(),
  })
  .strict();
export type GradcheckResult = z.output<typeof GradcheckResult>;

const BatchStats = z
  .object({
    sha256: z.string(),
    bytes: z.number().int(),
    rows: z.number().int(),
    tokens: z.number().int(),
    ids_sum: z.number().int(),
    masked_tokens: z.number().int(),
    max_row_tokens: z.number().int(),
    masked_logprob_sum: z.number().optional(),
    advantage_sum: z.number().optional(),
  })
  .strict();
export type BatchStats = z.output<typeof BatchStats>;

const op = <A extends z.ZodType, R extends z.ZodType>(args: A, result: R, description: string) => ({ args, result, description });
const Models = { model: ModelName.optional() };

/** Every op: its args and result schemas. */
export const ENGINE_OPS = {
  info: op(
    Empty,
    z.object({ python: z.string(), torch: z.string(), cuda: z.boolean(), loaded: z.boolean() }).strict(),
    'Versions and whether a model is loaded.',
  ),
  create_tiny: op(
    z.object({ out_dir: z.string(), config: TinyModelConfigSchema, seed: z.number().int().optional() }).strict(),
    z.object({ parameters: z.number().int() }).strict(),
    'Writes a randomly initialised tiny model (tiny_model.py) into out_dir.',
  ),
  load: op(LoadArgs, LoadResult, 'Loads the policy (and optimizer) to train.'),
  logprobs: op(LogprobsArgs, z.object({ logprobs: z.array(z.array(z.number())) }).strict(), 'No-grad log-probabilities per token id.'),
  logits: op(
    z.object({ input_ids: TokenIds, ...Models }).strict(),
    z.object({ logits: z.array(z.array(z.array(z.number()))) }).strict(),
    'Raw logits of short sequences, for checking exports.',
  ),
  sft_step: op(SftStepArgs, StepResult, 'One SFT update: masked token-mean cross-entropy.'),
  grpo_step: op(GrpoStepArgs, GrpoStepResult, 'One GRPO/GSPO update (loss settings: grpo_loss.py).'),
  set_reference: op(
    z.object({ tag: Tag }).strict(),
    z.object({ reference: z.string(), step: z.number().int() }).strict(),
    'Freezes the current policy as the KL reference, named by tag: a frozen copy, or with LoRA a copy of the adapter weights (the base is shared).',
  ),
  reset_optimizer: op(
    z.object({ tag: Tag }).strict(),
    z.object({ optimizer: z.string(), step: z.number().int() }).strict(),
    'A new optimizer (no moments, step count 0) named by tag, e.g. the GRPO stage it starts; the tag is saved with checkpoints and restored on resume.',
  ),
  save: op(
    z.object({ dir: z.string() }).strict(),
    z.object({ dir: z.string(), step: z.number().int(), reference: z.string().nullable(), optimizer: z.string().nullable() }).strict(),
    'Weights (LoRA: the adapter), optimizer state and the reference policy (reference/) into dir.',
  ),
  generate: op(
    z.object({ input_ids: TokenIds, max_new_tokens: z.number().int().positive().optional(), ...Models }).strict(),
    z.object({ tokens: z.array(z.array(z.number().int())), logprobs: z.array(z.array(z.number())) }).strict(),
    "Greedy continuation by transformers' generate (stops at EOS); raw-distribution log-probabilities.",
  ),
  export: op(
    z
      .object({
        dir: z.string(),
        format: z.enum(['onnx', 'weights']).optional(),
        /** onnx: the graphs' weights in one onnx/model.onnx_data beside them (true) or inside each graph (false); default: external above 1.5 GB of weights (protobuf's 2 GB limit). */
        external_data: z.boolean().optional(),
        /**
         * onnx: a directory where traced graphs are kept per model layout, library versions and tracing code,
         * so that an engine exporting a layout an earlier engine traced reads them instead of tracing
         * (engine/thinkfl_engine/onnx_graph_cache.py). Absent or null: trace in every engine process.
         */
        graph_cache: z.string().nullable().optional(),
      })
      .strict(),
    z
      .object({
        dir: z.string(),
        step: z.number().int(),
        onnx: z.string().optional(),
        /** The decode-step graph beside onnx (Llama, Qwen2). */
        decode_onnx: z.string().optional(),
        /**
         * onnx: 'traced' when the graphs were traced (the first export of a model layout), 'cached' when read from
         * graph_cache (a layout an earlier engine traced), 'weights' when only the new weights were written into them.
         */
        graphs: z.enum(['traced', 'cached', 'weights']).optional(),
      })
      .strict(),
    'weights: the checkpoint layout (LoRA: the adapter alone, for vLLM); onnx (default): a full model dir + onnx/model.onnx (LoRA: the adapter, and the merged model dir with onnx/ in merged/); its graphs are traced once per model layout (or read from graph_cache), later exports write only the new weights into them.',
  ),
  memory: op(
    z.object({ reset: z.boolean().optional() }).strict(),
    z
      .object({
        rss: z.number().int(),
        peak_rss: z.number().int(),
        cuda_allocated: z.number().int().optional(),
        cuda_peak: z.number().int().optional(),
      })
      .strict(),
    'Process memory in bytes: resident now and peak since the last reset; reset starts a new peak (CPU and CUDA).',
  ),
  loss: op(LossArgs, LossValues, 'The GRPO loss math on given per-token values (float64), for the test vectors.'),
  gradcheck: op(
    z.object({ seed: z.number().int().optional() }).strict(),
    GradcheckResult,
    'torch.autograd.gradcheck of the losses in float64.',
  ),
  batch_stats: op(
    z.object({ batch: BatchFileArg }).strict(),
    BatchStats,
    'Checks a token-batch file and sums its columns: the bulk data path without training.',
  ),
  shutdown: op(Empty, z.object({ bye: z.literal(true) }).strict(), 'Ends the engine after answering.'),
};

export type EngineOp = keyof typeof ENGINE_OPS;

/** Every op: its args (as callers write them, defaults optional) and result types. */
export type EngineOps = {
  [K in EngineOp]: { args: z.input<(typeof ENGINE_OPS)[K]['args']>; result: z.output<(typeof ENGINE_OPS)[K]['result']> };
};

export interface EngineRequest {
  id: number;
  op: EngineOp;
  args: unknown;
}

export type EngineResponse =
  | { id: number | null; ok: true; result: unknown }
  | {
      id: number | null;
      ok: false;
      error: string;
      traceback?: string;
      /** The engine cannot go on (a lost peer rank) and exits. */
      fatal?: boolean;
    };

/**
 * The protocol as one JSON Schema document (draft 2020-12): per op, its args (input form:
 * defaults may be left out) and result. Written to engine/thinkfl_engine/protocol.schema.json by
 * `npx tsx scripts/engine-schema.ts`; a test fails when the committed file differs.
 */
export function engineProtocolJsonSchema(): Record<string, unknown> {
  const ops: Record<string, unknown> = {};
  for (const [name, o] of Object.entries(ENGINE_OPS)) {
    const strip = (s: Record<string, unknown>) => {
      delete s.$schema;
      return s;
    };
    ops[name] = {
      description: o.description,
      args: strip(z.toJSONSchema(o.args, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>),
      result: strip(z.toJSONSchema(o.result, { io: 'output', unrepresentable: 'any' }) as Record<string, unknown>),
    };
  }
  return {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    description:
      'The train engine protocol, generated from packages/trainer-ctl/src/engine/protocol.ts by `npx tsx scripts/engine-schema.ts`: do not edit by hand.',
    ops,
  };
}
