/**
 * Benchmark: one SFT step of the tiny-cpu preset's model in float32 and in bfloat16 compute
 * (workers.train.autocast), side by side, measured in this run on interleaved repetitions,
 * and what `autocast: auto` picks on this CPU. Each precision runs its steps at one repeated
 * length and at a length new each step, as a run's conversations are: oneDNN, which runs
 * bfloat16's matrix products, builds its kernels per shape (experiment 28). Prints the CPU model,
 * its bf16 flags, the engine's threads, the load average, medians and the bf16/fp32 ratios.
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

// Token ids do not change the cost of a step: a fixed pseudo-random conversation of n tokens, loss on its second half.
const stepOf = (n: number) => {
  const ids = Array.from({ length: batch }, (_, b) => Array.from({ length: n }, (_, t) => (t * 7919 + b * 104729) % tok.vocabSize));
  return { input_ids: ids, mask: ids.map((row) => row.map((_, t) => (t >= n / 2 ? 1 : 0))), lr: 1e-4 };
};
const LENGTHS = ['repeated', 'new'] as const;
const PRECISIONS = ['float32', 'bfloat16'] as const;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const engines = { float32: new TrainEngine(), bfloat16: new TrainEngine(), auto: new TrainEngine() };
try {
  const { parameters } = await engines.float32.request('create_tiny', { out_dir: modelDir, config, seed: sizes.seed });
  const loaded = {
    float32: await engines.float32.request('load', { model_dir: modelDir, autocast: 'float32', threads, gradient_checkpointing }),
    bfloat16: await engines.bfloat16.request('load', { model_dir: modelDir, autocast: 'bfloat16', threads, gradient_checkpointing }),
    auto: await engines.auto.request('load', { model_dir: modelDir, autocast: 'auto', threads, gradient_checkpointing }),
  };
  const ms = Object.fromEntries(PRECISIONS.flatMap((p) => LENGTHS.map((l) => [`${p} ${l}`, [] as number[]])));
  for (const p of PRECISIONS) await engines[p].request('sft_step', stepOf(tokens)); // warm-up
  // Interleaved so that a change of machine load hits both precisions alike; each new length is one token
  // shorter than the last, none of them the warm-up's or the repeated one.
  for (let r = 0; r < reps; r++) {
    for (const p of PRECISIONS) {
      for (const l of LENGTHS) {
        const step = stepOf(l === 'repeated' ? tokens : tokens - 1 - r);
        const t0 = performance.now();
        await engines[p].request('sft_step', step);
        ms[`${p} ${l}`].push(performance.now() - t0);
      }
    }
  }
  console.log(
    `CPU: ${cpuModel}; bf16 instructions: ${bf16Flags.length ? bf16Flags.join(', ') : 'none'}; load average ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}`,
  );
  console.log(
    `model: ${parameters} parameters (${values.config} create_tiny); one SFT step of ${batch} x ~${tokens} tokens; ${loaded.float32.threads} engine threads; ${reps} reps`,
  );
  console.log(
    `${'precision'.padEnd(10)} ${'length'.padEnd(9)} ${'median ms'.padStart(10)} ${'min ms'.padStart(8)} ${'vs fp32'.padStart(8)}`,
  );
  for (const l of LENGTHS) {
    const fp32 = median(ms[`float32 ${l}`]);
    for (const p of PRECISIONS) {
      const v = median(ms[`${p} ${l}`]);
      console.log(
        `${p.padEnd(10)} ${l.padEnd(9)} ${v.toFixed(1).padStart(10)} ${Math.min(...ms[`${p} ${l}`])
          .toFixed(1)
          .padStart(8)} ${(v / fp32).toFixed(2).padStart(7)}x`,
      );
    }
  }
  for (const l of LENGTHS) {
    console.log(`bf16 speed-up over fp32 at a ${l} length: ${(median(ms[`float32 ${l}`]) / median(ms[`bfloat16 ${l}`])).toFixed(2)}x`);
  }
  console.log(`autocast auto picks: ${loaded.auto.precision}`);
} finally {
  await Promise.all(Object.values(engines).map((e) => e.shutdown()));
}
