/**
 * Memory estimate of a GPU run: what one train rank and one vLLM replica hold, against the GPUs
 * the config declares (resources). A lower bound (no allocator fragmentation, CUDA context, NCCL
 * buffers or vLLM's CUDA graphs), so a run it rejects cannot fit; one it accepts may still be tight.
 *
 * Parameters, from model.architecture (the backbone's config.json), a Llama/Qwen2 decoder:
 *   embedding V*h; per layer q h*H*d, k and v h*kv*d each (+ H*d + 2*kv*d biases for Qwen2),
 *   o H*d*h, gate/up/down 3*h*I, two RMSNorms 2h; final norm h; output head V*h unless tied.
 *   LoRA adds r*(in + out) per adapted linear layer (Hu et al. 2021, §4.1); those are the trainable ones.
 *
 * A train rank (ZeRO, Rajbhandari et al. 2020, §5: stage 1 shards optimizer states, 2 also
 * gradients, 3 also weights, each over the N ranks):
 *   weights     all parameters, 2 bytes under DeepSpeed bf16/fp16, else 4 (the plain engine keeps
 *               float32 weights and autocasts, engine/thinkfl_engine/precision.py);
 *   gradients   trainable parameters, at the weights' bytes;
 *   optimizer   Adam's m and v, 8 bytes per trainable parameter, plus the float32 master copy
 *               (4 more, ZeRO's K = 12) when the weights are 16-bit;
 *   reference   full fine-tuning with a KL term keeps a frozen copy of the weights (LoRA: the base
 *               with adapters disabled, nothing extra);
 *   activations T = micro_batch_size x max_context_tokens tokens (the longest episode). The engine
 *               checkpoints every decoder layer on CUDA (hf_backend.py), so it keeps each layer's
 *               input, L*T*h at the weights' bytes, plus one layer recomputed in backward: the
 *               tensors autograd saves in it under SDPA attention (no T^2 scores), in 16-bit
 *               autocast, 2*T*(4h + (H + 2kv)*d + H*d + 4I) bytes (norm inputs, q/k/v, attention
 *               output, gate/up outputs, their product and activation); and the output head in
 *               chunks of 1024 positions, 3 float32 chunk x V buffers (logits, softmax, gradient).
 * Colocated (resources.colocate) with a static split, a train rank has (1 - vllm_gpu_memory_utilization)
 * of its GPU throughout. With generation.backend.sleep_during_updates the replicas sleep through
 * each update (level 1: weights, adapters and CUDA graphs to host memory, KV cache freed), so
 * the update may use the whole GPU, but what the rank keeps between updates (weights, gradients,
 * optimizer, reference: activations are freed) must fit beside the awake replica's share.
 * A vLLM replica (its --gpu-memory-utilization share of one GPU must hold):
 *   weights at 2 bytes (bfloat16), the loaded adapters (staleness + 1 versions, 2 bytes per LoRA
 *   parameter), and the KV cache of one max_context_tokens sequence, 2 (K and V) x L x kv x d x
 *   2 bytes per token: vLLM refuses to start when max_model_len does not fit its KV cache.
 */
import { readFileSync } from 'node:fs';
import type { RunConfig } from './schema';

const GIB = 1024 ** 3;
const HEAD_CHUNK = 1024;

type Architecture = NonNullable<RunConfig['model']['architecture']>;
type Lora = NonNullable<RunConfig['model']['lora']>;
type Resources = NonNullable<RunConfig['resources']>;

export interface TrainRankMemory {
  weights: number;
  gradients: number;
  optimizer: number;
  reference: number;
  activations: number;
  total: number;
  /** What each train rank's GPU gives it during an update, bytes. */
  budget: number;
  /** With replicas asleep during updates: what the rank keeps between updates (weights, gradients, optimizer, reference), and the room beside an awake replica. */
  between?: { total: number; budget: number };
}

export interface VllmReplicaMemory {
  weights: number;
  adapters: number;
  kvCache: number;
  total: number;
  /** The replica's --gpu-memory-utilization share of its GPU, bytes. */
  budget: number;
}

export interface MemoryEstimate {
  parameters: number;
  trainable: number;
  zeroStage: number;
  ranks: number;
  replicas: number;
  gpusNeeded: number;
  gpus: number;
  train: TrainRankMemory;
  /** Absent when generation does not run on vLLM replicas of this run. */
  vllm?: VllmReplicaMemory;
  /** Each reason the run cannot fit its GPUs, naming the numbers; empty when it fits. */
  problems: string[];
}

/** [in, out] features of a Llama/Qwen2 linear layer, by PEFT module name. */
function linearShape(a: Architecture, name: string): [number, number] {
  const q = a.heads * a.head_dim;
  const kv = a.kv_heads * a.head_dim;
  const shapes: Record<string, [number, number]> = {
    q_proj: [a.hidden_size, q],
    k_proj: [a.hidden_size, kv],
    v_proj: [a.hidden_size, kv],
    o_proj: [q, a.hidden_size],
    gate_proj: [a.hidden_size, a.intermediate_size],
    up_proj: [a.hidden_size, a.intermediate_size],
    down_proj: [a.intermediate_size, a.hidden_size],
  };
  const s = shapes[name];
  if (s === undefined) throw new Error(`model.lora.target_modules: cannot size "${name}" (known: ${Object.keys(shapes).join(', ')})`);
  return s;
}

/** Parameters of the base model. */
export function baseParameters(a: Architecture): number {
  const h = a.hidden_size;
  const q = a.heads * a.head_dim;
  const kv = a.kv_heads * a.head_dim;
  const attention = h * q + 2 * h * kv + q * h + (a.qkv_bias ? q + 2 * kv : 0);
  const layer = attention + 3 * h * a.intermediate_size + 2 * h;
  const embedding = a.vocab_size * h;
  return embedding + a.layers * layer + h + (a.tie_word_embeddings ? 0 : embedding);
}

/** Parameters the adapters add, all trainable. */
export function loraParameters(a: Architecture, lora: Lora): number {
  return (
    a.layers *
    lora.target_modules.reduce((n, m) => {
      const [i, o] = linearShape(a, m);
      return n + lora.r * (i + o);
    }, 0)
  );
}

interface DeepSpeedSettings {
  zeroStage: number;
  sixteenBit: boolean;
}

function readDeepSpeed(path: string | undefined): DeepSpeedSettings {
  if (path === undefined) return { zeroStage: 0, sixteenBit: false };
  let json: { zero_optimization?: { stage?: number }; bf16?: { enabled?: boolean }; fp16?: { enabled?: boolean } };
  try {
    json = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new Error(`workers.train.deepspeed_config: cannot read ${path}: ${(e as Error).message}`);
  }
  return {
    zeroStage: json.zero_optimization?.stage ?? 0,
    sixteenBit: json.bf16?.enabled === true || json.fp16?.enabled === true,
  };
}

const gib = (bytes: number) => `${(bytes / GIB).toFixed(2)} GiB`;

/** What the memory of one GPU is shared with: the budget of a train rank and of a vLLM replica follow from it. */
interface GpuShare {
  /** resources.gpu_memory_gib, bytes. */
  mem: number;
  /** resources.vllm_gpu_memory_utilization. */
  util: number;
  /** Train ranks and vLLM replicas on the same GPUs (resources.colocate with vLLM). */
  shared: boolean;
  /** Colocated replicas sleep during updates (generation.backend.sleep_during_updates). */
  sleeping: boolean;
}

/** One train rank: ZeRO shards the weights, gradients and optimizer state over the ranks from stages 3, 2 and 1. */
function trainRankMemory(
  c: RunConfig,
  a: Architecture,
  ds: DeepSpeedSettings,
  base: number,
  adapters: number,
  gpu: GpuShare,
): TrainRankMemory {
  const ranks = c.workers.train.ranks;
  const shard = (stage: number) => (ds.zeroStage >= stage ? ranks : 1);
  const parameters = base + adapters;
  const trainable = c.model.lora === undefined ? base : adapters;
  const wBytes = ds.sixteenBit ? 2 : 4;
  const tokens = c.workers.train.micro_batch_size * c.model.max_context_tokens;
  const h = a.hidden_size;
  const layerSaved = 2 * tokens * (4 * h + (a.heads + 2 * a.kv_heads) * a.head_dim + a.heads * a.head_dim + 4 * a.intermediate_size);
  const head = 3 * Math.min(tokens, HEAD_CHUNK) * a.vocab_size * 4;
  const train: TrainRankMemory = {
    weights: (parameters * wBytes) / shard(3),
    gradients: (trainable * wBytes) / shard(2),
    optimizer: (trainable * (8 + (ds.sixteenBit ? 4 : 0))) / shard(1),
    reference: c.model.lora === undefined && c.grpo.loss.kl_coef > 0 ? base * wBytes : 0,
    activations: a.layers * tokens * h * wBytes + layerSaved + head,
    total: 0,
    budget: gpu.shared && !gpu.sleeping ? gpu.mem * (1 - gpu.util) : gpu.mem,
  };
  train.total = train.weights + train.gradients + train.optimizer + train.reference + train.activations;
  if (gpu.sleeping)
    train.between = { total: train.weights + train.gradients + train.optimizer + train.reference, budget: gpu.mem * (1 - gpu.util) };
  return train;
}

/** Why a train rank does not fit its budget (during an update, and between updates beside an awake replica). */
function trainProblems(train: TrainRankMemory, res: Resources, gpu: GpuShare): string[] {
  const problems: string[] = [];
  const budgetWhy =
    gpu.shared && !gpu.sleeping
      ? `resources.gpu_memory_gib ${res.gpu_memory_gib} x (1 - vllm_gpu_memory_utilization ${gpu.util}), colocated with vLLM`
      : `resources.gpu_memory_gib ${res.gpu_memory_gib}${gpu.sleeping ? ', the vLLM replica asleep' : ''}`;
  if (train.total > train.budget) {
    problems.push(
      `a train rank needs at least ${gib(train.total)} (weights ${gib(train.weights)} + gradients ${gib(train.gradients)} + ` +
        `optimizer ${gib(train.optimizer)} + reference ${gib(train.reference)} + activations ${gib(train.activations)}) ` +
        `but has ${gib(train.budget)} (${budgetWhy})`,
    );
  }
  if (train.between && train.between.total > train.between.budget) {
    problems.push(
      `between updates a train rank keeps at least ${gib(train.between.total)} (weights ${gib(train.weights)} + gradients ` +
        `${gib(train.gradients)} + optimizer ${gib(train.optimizer)} + reference ${gib(train.reference)}) but an awake vLLM replica ` +
        `leaves it ${gib(train.between.budget)} (resources.gpu_memory_gib ${res.gpu_memory_gib} x (1 - vllm_gpu_memory_utilization ${gpu.util}))`,
    );
  }
  return problems;
}

/** One vLLM replica: the base weights in 16 bits, the adapters of the versions it keeps loaded, one sequence's KV cache. */
function vllmReplicaMemory(c: RunConfig, a: Architecture, base: number, adapters: number, gpu: GpuShare): VllmReplicaMemory | undefined {
  if (c.generation.backend.kind !== 'vllm') return undefined;
  const loaded = (c.generation.backend.staleness ?? c.workers.max_staleness) + 1;
  const vllm: VllmReplicaMemory = {
    weights: base * 2,
    adapters: loaded * adapters * 2,
    kvCache: 2 * a.layers * a.kv_heads * a.head_dim * 2 * c.model.max_context_tokens,
    total: 0,
    budget: gpu.mem * gpu.util,
  };
  vllm.total = vllm.weights + vllm.adapters + vllm.kvCache;
  return vllm;
}

/** The estimate of a run config that declares resources (paths resolved, as loadRunConfig gives them). */
export function estimateMemory(c: RunConfig): MemoryEstimate {
  const res = c.resources;
  const a = c.model.architecture;
  if (res === undefined || a === undefined) throw new Error('the memory estimate needs resources and model.architecture');
  const ds = readDeepSpeed(c.workers.train.deepspeed_config);
  const ranks = c.workers.train.ranks;
  const base = baseParameters(a);
  const adapters = c.model.lora === undefined ? 0 : loraParameters(a, c.model.lora);
  const backend = c.generation.backend;
  const replicas = backend.kind === 'vllm' ? backend.replicas.length : 0;
  const shared = backend.kind === 'vllm' && res.colocate;
  const gpu: GpuShare = {
    mem: res.gpu_memory_gib * GIB,
    util: res.vllm_gpu_memory_utilization,
    shared,
    sleeping: shared && backend.kind === 'vllm' && backend.sleep_during_updates,
  };
  const train = trainRankMemory(c, a, ds, base, adapters, gpu);
  const vllm = vllmReplicaMemory(c, a, base, adapters, gpu);

  const problems: string[] = [];
  const gpusNeeded = shared ? Math.max(ranks, replicas) : ranks + replicas;
  if (gpusNeeded > res.gpus) {
    problems.push(
      `needs ${gpusNeeded} GPUs (${ranks} train ranks ${shared ? 'sharing them with' : 'plus'} ${replicas} vLLM replicas) ` +
        `but resources.gpus is ${res.gpus}`,
    );
  }
  problems.push(...trainProblems(train, res, gpu));
  if (vllm && vllm.total > vllm.budget) {
    problems.push(
      `a vLLM replica needs at least ${gib(vllm.total)} (weights ${gib(vllm.weights)} + adapters ${gib(vllm.adapters)} + ` +
        `KV cache of ${c.model.max_context_tokens} tokens ${gib(vllm.kvCache)}) but has ${gib(vllm.budget)} ` +
        `(resources.gpu_memory_gib ${res.gpu_memory_gib} x vllm_gpu_memory_utilization ${gpu.util})`,
    );
  }
  const parameters = base + adapters;
  const trainable = c.model.lora === undefined ? base : adapters;
  return { parameters, trainable, zeroStage: ds.zeroStage, ranks, replicas, gpusNeeded, gpus: res.gpus, train, vllm, problems };
}

/** The estimate as `config validate` prints it. */
export function formatMemoryEstimate(e: MemoryEstimate): string {
  const t = e.train;
  const lines = [
    `  memory: ${(e.parameters / 1e9).toFixed(3)}B parameters, ${(e.trainable / 1e6).toFixed(1)}M trainable, ` +
      `ZeRO stage ${e.zeroStage}; train ranks ${e.ranks}, vLLM replicas ${e.replicas}, GPUs ${e.gpusNeeded} of ${e.gpus}`,
    `  train rank: weights ${gib(t.weights)} + gradients ${gib(t.gradients)} + optimizer ${gib(t.optimizer)} + ` +
      `reference ${gib(t.reference)} + activations ${gib(t.activations)} = ${gib(t.total)} of ${gib(t.budget)}` +
      (t.between ? ` (vLLM asleep); between updates ${gib(t.between.total)} of ${gib(t.between.budget)} beside vLLM` : ''),
  ];
  if (e.vllm !== undefined) {
    const v = e.vllm;
    lines.push(
      `  vLLM replica: weights ${gib(v.weights)} + adapters ${gib(v.adapters)} + KV cache ${gib(v.kvCache)} = ` +
        `${gib(v.total)} of ${gib(v.budget)}`,
    );
  }
  return `${lines.join('\n')}\n`;
}
