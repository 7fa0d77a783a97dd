/**
 * The backbone presets train (issue 10, item 6): each of configs/llama-3.2-3b.yaml,
 * qwen2.5-3b.yaml, qwen2.5-0.5b.yaml and llama-3-8b.yaml makes one real GRPO update through the
 * train worker (a real Redis, the train queue, the engine under DeepSpeed), and only its LoRA
 * adapter changes.
 *
 * Swapped, because it cannot run here (no GPU, no hub download, no vLLM):
 * - model.hub_id -> model.dir: a tiny model of the preset's architecture kind (Llama or Qwen2,
 *   whose q/k/v biases the bitwise check below covers), created by the engine's create_tiny
 *   with a tokenizer fitted to the Nezha data (scripts/create-tiny-model.ts); model.architecture
 *   stays the backbone's (config validate's memory estimate reads it);
 * - workers.train.device cuda -> cpu: the preset's ranks (1) and configs/deepspeed/zero2.json
 *   (bf16, ZeRO-2) are kept, so the engine starts as on the GPU node: through torchrun with one
 *   rank, joining the launcher's process group (without it DeepSpeed looks for MPI and stops on
 *   `No module named 'mpi4py'`), on DeepSpeed's CPU accelerator with gloo;
 * - generation.backend.policy_format weights -> onnx: the train worker then writes, beside the
 *   same PEFT adapter vLLM would load, the merged model, whose every weight is compared with
 *   the base model's (vLLM's replicas are never contacted by the train worker, so the
 *   replica URLs stay);
 * - run.output_dir and run.base_dir: a scratch directory, paths resolved from the repository.
 * Kept: model.lora, model.dtype, max_context_tokens, the whole grpo section (loss with its KL
 * coefficient and estimator, optimizer lr and clipping), micro_batch_size, resources.
 *
 * The GRPO batch is two real scripted-expert episodes tokenized with the tiny model's chat
 * template, advantages +1 and -1.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createExpert, ExpertSettingsSchema, loadDataset, runEpisode, type Dataset } from '@thinkfl/env';
import { loadChatModel, tokenizeEpisode, verifyManifest } from '@thinkfl/rollout';
import { loadRunConfig } from '../src/config/index';
import { parseQueueSettings, PolicyRegistry, TrainQueue, type TrainResult, type TrainSample } from '../src/queue/index';
import { startTrainWorker } from '../src/workers/index';
import { ensureNezhaDataset, REPO_ROOT } from '../../../testkit/nezha';
import { readSafetensors, tensorValues, type Tensor } from '../../../testkit/safetensors';
import { closeGround, openGround, type WorkerGround } from './workers-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';

/** Each backbone preset and the transformers architecture of its hub model (config.json model_type). */
const PRESETS: [string, 'llama' | 'qwen2'][] = [
  ['llama-3.2-3b', 'llama'],
  ['qwen2.5-3b', 'qwen2'],
  ['qwen2.5-0.5b', 'qwen2'],
  ['llama-3-8b', 'llama'],
];

let ground: WorkerGround;
let dataset: Dataset;

beforeAll(async () => {
  ground = await openGround('presets');
  dataset = await loadDataset(await ensureNezhaDataset());
}, 300_000);
afterAll(() => closeGround(ground));

/** float32 -> bfloat16 bits, round to nearest even (how torch casts). */
function bf16Bits(x: number): number {
  const f = Buffer.alloc(4);
  f.writeFloatLE(x, 0);
  const bits = f.readUInt32LE(0);
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

/** The base tensor in the merged tensor's dtype, as bytes. */
function castAs(base: Tensor, dtype: string): Buffer {
  if (base.dtype !== 'F32') throw new Error(`base tensor dtype ${base.dtype}: the tiny model is written in float32`);
  if (dtype === 'F32') return base.data;
  if (dtype !== 'BF16') throw new Error(`merged dtype ${dtype}`);
  const v = tensorValues(base);
  const out = Buffer.alloc(2 * v.length);
  v.forEach((x, i) => out.writeUInt16LE(bf16Bits(x), 2 * i));
  return out;
}

/** (alpha / r) B A, the LoRA update of one weight (Hu et al. 2021, eq. 3), in float64. */
function loraDelta(a: Tensor, b: Tensor, scale: number): Float64Array {
  const [r, cols] = a.shape;
  const rows = b.shape[0];
  const av = tensorValues(a);
  const bv = tensorValues(b);
  const out = new Float64Array(rows * cols);
  for (let i = 0; i < rows; i++)
    for (let k = 0; k < r; k++) for (let j = 0; j < cols; j++) out[i * cols + j] += scale * bv[i * r + k] * av[k * cols + j];
  return out;
}

/** Input and output width of each adaptable projection of a config.json (the tiny model's). */
function projectionShapes(c: {
  hidden_size: number;
  intermediate_size: number;
  num_attention_heads: number;
  num_key_value_heads: number;
  head_dim: number;
}): Record<string, [number, number]> {
  const q = c.num_attention_heads * c.head_dim;
  const kv = c.num_key_value_heads * c.head_dim;
  return {
    q_proj: [c.hidden_size, q],
    k_proj: [c.hidden_size, kv],
    v_proj: [c.hidden_size, kv],
    o_proj: [q, c.hidden_size],
    gate_proj: [c.hidden_size, c.intermediate_size],
    up_proj: [c.hidden_size, c.intermediate_size],
    down_proj: [c.intermediate_size, c.hidden_size],
  };
}

describe.each(PRESETS)('preset %s', (preset, architecture) => {
  it('makes one GRPO update through the train worker under its DeepSpeed config, changing only its LoRA adapter', async () => {
    const root = join(ground.dir, preset);
    const modelDir = await createTinyModel(join(root, 'model'), 1, architecture);
    const raw = parse(readFileSync(join(REPO_ROOT, 'configs', `${preset}.yaml`), 'utf8')) as {
      run: Record<string, unknown>;
      model: Record<string, unknown>;
      generation: { backend: Record<string, unknown> };
      workers: { train: Record<string, unknown> };
    };
    delete raw.model.hub_id;
    raw.model.dir = modelDir;
    raw.run.base_dir = REPO_ROOT;
    raw.run.output_dir = join(root, 'runs');
    raw.workers.train.device = 'cpu';
    raw.generation.backend.policy_format = 'onnx';
    const file = join(root, 'run.yaml');
    writeFileSync(file, stringify(raw));
    const { config, runDir } = loadRunConfig(file);
    const lora = config.model.lora!;
    expect(config.workers.train.deepspeed_config).toBe(join(REPO_ROOT, 'configs', 'deepspeed', 'zero2.json'));
    expect(config.workers.train.ranks).toBe(1);
    expect(config.grpo.loss.kl_coef).toBeGreaterThan(0);

    // Two real expert episodes as one group, tokenized with the tiny model's own chat template.
    const chat = loadChatModel(modelDir);
    const expert = createExpert(dataset, ExpertSettingsSchema.parse({}));
    const samples: TrainSample[] = [];
    for (const [i, c] of dataset.cases.slice(0, 2).entries()) {
      const ep = await runEpisode({ dataset, case: c, policy: expert, settings: { d_max: 3, tool_settings: { span_aliases: true } } });
      samples.push({ ...tokenizeEpisode(ep.messages, chat.template, chat.tokenizer), advantage: i === 0 ? 1 : -1, temperature: 1 });
    }

    const logs: string[] = [];
    const settings = parseQueueSettings({ prefix: 'thinkfl', pollMs: 50 });
    const worker = await startTrainWorker({
      connection: ground.conn,
      runId: preset,
      workerId: 'trainer',
      settings,
      config,
      runDir,
      log: (l) => logs.push(l),
    });
    const queue = new TrainQueue(ground.conn, preset, settings);
    let result: TrainResult;
    try {
      await queue.submit({ run_id: preset, stage: 'priming', update: 0, kind: 'grpo', samples, checkpoint: false });
      result = await queue.waitResult(0, 600_000);
    } finally {
      await queue.close();
      await worker.close();
    }
    expect(result.version).toBe(1);
    expect(Number.isFinite(result.metrics.loss)).toBe(true);
    expect(await new PolicyRegistry(ground.conn, preset).current()).toEqual({ version: 1, dir: join(runDir, 'adapters', 'v1') });

    // The engine trained exactly the adapters: r (in + out) per adapted projection and layer.
    const modelConfig = JSON.parse(readFileSync(join(modelDir, 'config.json'), 'utf8'));
    expect(modelConfig.model_type).toBe(architecture);
    const shapes = projectionShapes(modelConfig);
    const trainable = modelConfig.num_hidden_layers * lora.target_modules.reduce((n, m) => n + lora.r * (shapes[m][0] + shapes[m][1]), 0);
    const loadLine = logs.find((l) => l.startsWith('engine loaded'));
    expect(loadLine).toContain(`(LoRA: ${trainable} trainable)`);
    // Started by torchrun with the preset's one rank: the engine logs as rank 0 of its launcher's group.
    expect(loadLine).toContain('1 rank,');
    expect(logs.some((l) => l.includes('[engine rank 0]'))).toBe(true);
    // The preset's KL term (kl_coef > 0) took its reference before the update.
    expect(logs.some((l) => l.includes('KL reference: the policy before update 0 (grpo_start)'))).toBe(true);

    const v0 = join(runDir, 'adapters', 'v0');
    const v1 = join(runDir, 'adapters', 'v1');
    await verifyManifest(v1, 1);
    // The version directory is the preset's PEFT adapter, what vLLM's load_lora_adapter reads.
    const adapterConfig = JSON.parse(readFileSync(join(v1, 'adapter_config.json'), 'utf8'));
    expect(adapterConfig).toMatchObject({ peft_type: 'LORA', r: lora.r, lora_alpha: lora.alpha, lora_dropout: lora.dropout });
    expect([...adapterConfig.target_modules].sort()).toEqual([...lora.target_modules].sort());
    const adapter = readSafetensors(join(v1, 'adapter_model.safetensors'));
    const expected = [...Array(modelConfig.num_hidden_layers).keys()].flatMap((layer) =>
      lora.target_modules.flatMap((m) => ['A', 'B'].map((ab) => `${layer}.${m}.lora_${ab}`)),
    );
    const found = [...adapter.keys()].map((k) => {
      const m = /\.layers\.(\d+)\.(?:self_attn|mlp)\.(\w+)\.lora_([AB])\.weight$/.exec(k);
      return m ? `${m[1]}.${m[2]}.lora_${m[3]}` : k;
    });
    expect(found.sort()).toEqual(expected.sort());
    // B starts at 0 (v0 is the base model); the update moved it.
    const bBytes = (a: Map<string, Tensor>) => Buffer.concat([...a].filter(([k]) => k.includes('lora_B')).map(([, t]) => t.data));
    expect(bBytes(readSafetensors(join(v0, 'adapter_model.safetensors'))).every((b) => b === 0)).toBe(true);
    expect(bBytes(adapter).some((b) => b !== 0)).toBe(true);

    // Every base weight is the base model's: bit for bit where no adapter sits (embeddings,
    // norms, output head, Qwen2's q/k/v biases), and W + (alpha/r) B A within the merged
    // dtype's rounding for the adapted projections.
    const base = readSafetensors(join(modelDir, 'model.safetensors'));
    const merged = readSafetensors(join(v1, 'merged', 'model.safetensors'));
    expect([...merged.keys()].sort()).toEqual([...base.keys()].sort());
    const scale = lora.alpha / lora.r;
    let bitwise = 0;
    let adapted = 0;
    let worst = 0;
    for (const [name, w] of base) {
      const m = merged.get(name)!;
      const target = /\.layers\.(\d+)\.(self_attn|mlp)\.(\w+)\.weight$/.exec(name);
      if (!target || !lora.target_modules.includes(target[3])) {
        expect(m.data.equals(castAs(w, m.dtype)), name).toBe(true);
        bitwise++;
        continue;
      }
      const key = (ab: string) =>
        [...adapter.keys()].find((k) => k.endsWith(`.layers.${target[1]}.${target[2]}.${target[3]}.lora_${ab}.weight`))!;
      const delta = loraDelta(adapter.get(key('A'))!, adapter.get(key('B'))!, scale);
      const wv = tensorValues(w);
      const mv = tensorValues(m);
      // Rounding of W, of B A and of the sum to the merged dtype: a few units in its last place.
      const ulp = m.dtype === 'BF16' ? 2 ** -6 : 2 ** -20;
      for (let i = 0; i < wv.length; i++) {
        const err = Math.abs(mv[i] - (wv[i] + delta[i]));
        expect(err, `${name}[${i}]`).toBeLessThanOrEqual(ulp * (Math.abs(wv[i]) + Math.abs(delta[i])) + 1e-12);
        worst = Math.max(worst, err);
      }
      adapted++;
    }
    expect(adapted).toBe(modelConfig.num_hidden_layers * lora.target_modules.length);
    console.log(
      `[figure] ${preset}: ${architecture}, LoRA r ${lora.r} on ${lora.target_modules.join(',')} (${trainable} trainable), ZeRO-2 on 1 CPU rank (torchrun), ` +
        `loss ${result.metrics.loss}, grad norm ${result.metrics.grad_norm}; merged dtype ${merged.values().next().value!.dtype}: ` +
        `${bitwise} tensors bit-identical to the base, ${adapted} adapted within ${worst.toExponential(2)} of W + (alpha/r) B A`,
    );
  }, 900_000);
});
