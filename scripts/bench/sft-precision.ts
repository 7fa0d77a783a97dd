/**
 * Benchmark: one SFT step of the tiny-cpu preset's model in float32 and in bfloat16 compute
 * (workers.train.autocast), side by side, measured in this run on interleaved repetitions,
 * and what `autocast: auto` picks on this CPU. Prints the CPU model, its bf16 flags, the
 * engine's threads, the load average, medians and the bf16/fp32 ratio.
 *
 *   npx tsx scripts/bench/sft-precision.ts [--tokens N] [--batch N] [--reps N] [--threads N] [--config FILE]
 */
import { mkdtempSync, readFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { writeTinyTokenizer } from '../../packages/rollout/src/chat/tiny-tokenizer';
import { loadRunConfig } from '../../packages/trainer-ctl/src/config/index';
import { TinyModelConfigSchema, TrainEngine } from '../../packages/trainer-ctl/src/engine/index';
import { ensureNezhaDataset, REPO_ROOT } from '../../testkit/nezha';

const { values } = parseArgs({
  options: {
    /** Tokens per conversation (tiny-cpu's conversations are ~1k tokens). */
    tokens: { type: 'string', default: '1024' },
    /** Conversations per SFT step (tiny-cpu: stages.priming.sft.batch_size). */
    batch: { type: 'string', default: '1' },
    /** Timed repetitions per precision (the median is printed). */
    reps: { type: 'string', default: '10' },
    /** torch threads of the engines; default every core of the process's CPU affinity (the engine's default). */
    threads: { type: 'string' },
    /** Run config whose model.create_tiny sizes are measured. */
    config: { type: 'string', default: join(REPO_ROOT, 'configs', 'tiny-cpu.yaml') },
  },
});
const tokens = Number(values.tokens);
const batch = Number(values.batch);
const reps = Number(values.reps);
const threads = values.threads === undefined ? null : Number(values.threads);

const cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
const cpuModel = cpuinfo.match(/^model name\s*:\s*(.*)$/m)?.[1] ?? 'unknown';
const flags = cpuinfo.match(/^flags\s*:(.*)$/m)?.[1].split(/\s+/) ?? [];
const bf16Flags = ['avx512_bf16', 'amx_bf16'].filter((f) => flags.includes(f));

const preset = loadRunConfig(values.config, { checkPaths: false }).config;
const sizes = preset.model.create_tiny ?? { seed: 0 };
// As the train worker loads it.
const gradient_checkpointing = preset.workers.train.gradient_checkpointing;
const dir = mkdtempSync(join(tmpdir(), 'bench-sft-precision-'));
const modelDir = join(dir, 'tiny');
const tok = await writeTinyTokenizer(modelDir, await ensureNezhaDataset());
const config = TinyModelConfigSchema.parse({
  vocab_size: tok.vocabSize,
  eos_token_id: tok.eosTokenId,
  pad_token_id: tok.padTokenId,
  ...(sizes.hidden_size !== undefined && { hidden_size: sizes.hidden_size }),
  ...(sizes.layers !== undefined && { num_hidden_layers: sizes.layers }),
  ...(sizes.heads !== undefined && { num_attention_heads: sizes.heads, num_key_value_heads: sizes.kv_heads ?? sizes.heads }),
  ...(sizes.head_dim !== undefined && { head_dim: sizes.head_dim }),
  ...(sizes.intermediate_size !== undefined && { intermediate_size: sizes.intermediate_size }),
});

// Token ids do not change the cost of a step: a fixed pseudo-random conversation, loss on its second half.
const ids = Array.from({ length: batch }, (_, b) => Array.from({ length: tokens }, (_, t) => (t * 7919 + b * 104729) % tok.vocabSize));
const step = { input_ids: ids, mask: ids.map((row) => row.map((_, t) => (t >= tokens / 2 ? 1 : 0))), lr: 1e-4 };

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const engines = { float32: new TrainEngine(), bfloat16: new TrainEngine(), auto: new TrainEngine() };
try {
  const { parameters } = await engines.float32.request('create_tiny', { out_dir: modelDir, config, seed: sizes.seed });
  const loaded = {
    float32: await engines.float32.request('load', { model_dir: modelDir, autocast: 'float32', threads, gradient_checkpointing }),
    bfloat16: await engines.bfloat16.request('load', { model_dir: modelDir, autocast: 'bfloat16', threads, gradient_checkpointing }),
    auto: await engines.auto.request('load', { model_dir: modelDir, autocast: 'auto', threads, gradient_checkpointing }),
  };
  const ms: Record<'float32' | 'bfloat16', number[]> = { float32: [], bfloat16: [] };
  for (const p of ['float32', 'bfloat16'] as const) await engines[p].request('sft_step', step); // warm-up
  // Interleaved so that a change of machine load hits both precisions alike.
  for (let r = 0; r < reps; r++) {
    for (const p of ['float32', 'bfloat16'] as const) {
      const t0 = performance.now();
      await engines[p].request('sft_step', step);
      ms[p].push(performance.now() - t0);
    }
  }
  const fp32 = median(ms.float32);
  const bf16 = median(ms.bfloat16);
  console.log(
    `CPU: ${cpuModel}; bf16 instructions: ${bf16Flags.length ? bf16Flags.join(', ') : 'none'}; load average ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
  console.log(
    `model: ${parameters} parameters (${values.config} create_tiny); one SFT step of ${batch} x ${tokens} tokens; ${loaded.float32.threads} engine threads; ${reps} reps`,
  );
  console.log(`${'precision'.padEnd(10)} ${'median ms'.padStart(10)} ${'min ms'.padStart(8)} ${'vs fp32'.padStart(8)}`);
  for (const [p, v] of [
    ['float32', fp32],
    ['bfloat16', bf16],
  ] as const) {
    console.log(
      `${p.padEnd(10)} ${v.toFixed(1).padStart(10)} ${Math.min(...ms[p])
        .toFixed(1)
        .padStart(8)} ${(v / fp32).toFixed(2).padStart(7)}x`,
    );
  }
  console.log(`bf16 speed-up over fp32: ${(fp32 / bf16).toFixed(2)}x`);
  console.log(`autocast auto picks: ${loaded.auto.precision}`);
} finally {
  await Promise.all(Object.values(engines).map((e) => e.shutdown()));
}
