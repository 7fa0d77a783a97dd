/**
 * Benchmark: one prompt prefilled from nothing, whole (the baseline) against in chunks that each
 * run on the last one's key/values, by the onnx backend scheduler's own prefillInChunks
 * (generation.backend.prefill_chunk), on both KV layouts: the export's decode graph
 * (prefix-cache.ts) and the model's own graph (padded-cache.ts). Prompts are synthetic token ids
 * of several lengths; medians of --reps runs each, alternating. Prints the CPU model, cores, load
 * average and each chunk size's ratio to the whole prefill.
 *
 *   npx tsx scripts/bench/prefill-chunks.ts --policy runs/tiny-cpu/policies/v27 [--reps 5] [--threads 1]
 */
import { cpus, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import {
  decodeGraphPath,
  loadDecodeGraph,
  loadOnnxCausalLM,
  locateOnnx,
  readModelConfig,
} from '../../packages/rollout/src/backends/onnx/model';
import { PaddedCache } from '../../packages/rollout/src/backends/onnx/padded-cache';
import { SharedPrefixCache } from '../../packages/rollout/src/backends/onnx/prefix-cache';
import { prefillInChunks } from '../../packages/rollout/src/backends/onnx/scheduler';

const { values } = parseArgs({
  options: {
    /** An exported policy directory with onnx/model.onnx and onnx/decode.onnx. */
    policy: { type: 'string' },
    reps: { type: 'string', default: '5' },
    /** onnxruntime intra-op threads (the tiny-cpu preset's rollouts use 1). */
    threads: { type: 'string', default: '1' },
    lengths: { type: 'string', default: '600,1500,3000' },
    chunks: { type: 'string', default: '32,64,128,256' },
  },
});
if (!values.policy) throw new Error('--policy DIR is required (an exported policy, e.g. runs/tiny-cpu/policies/v27)');
const { onnxPath, modelDir } = locateOnnx(resolve(values.policy));
const decodePath = decodeGraphPath(onnxPath);
if (!decodePath) throw new Error(`${join(modelDir, 'onnx')}: no decode.onnx beside ${onnxPath}; export the policy with the trainer`);
const cfg = readModelConfig(modelDir);
const session = { threads: Number(values.threads), spin: false };
const layouts = {
  'decode graph': new SharedPrefixCache(await loadDecodeGraph(decodePath, cfg, session), cfg.padId),
  'model graph': new PaddedCache(await loadOnnxCausalLM(onnxPath, cfg, session)),
};
const chunks = values.chunks.split(',').map(Number);
const reps = Number(values.reps);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const load0 = loadavg()[0];

const rows: string[][] = [];
for (const length of values.lengths.split(',').map(Number)) {
  const prompt = Array.from({ length }, (_, i) => 5 + ((i * 7919) % Math.max(1, cfg.vocabSize - 5)));
  for (const [name, cache] of Object.entries(layouts)) {
    // 0 is the whole prompt in one run.
    const sizes = [0, ...chunks];
    const times = sizes.map(() => [] as number[]);
    for (let r = 0; r <= reps; r++) {
      for (const [k, chunk] of sizes.entries()) {
        const t0 = performance.now();
        await prefillInChunks(cache, prompt, chunk === 0 ? length : chunk);
        if (r > 0) times[k].push(performance.now() - t0);
      }
    }
    const whole = median(times[0]);
    rows.push([
      String(length),
      name,
      whole.toFixed(1),
      ...times.slice(1).map((t) => `${median(t).toFixed(1)} (${(median(t) / whole).toFixed(2)}x)`),
    ]);
  }
}
console.log(
  `CPU: ${cpus()[0]?.model ?? 'unknown'}, ${cpus().length} cores; load average (1 min) ${load0.toFixed(1)} -> ${loadavg()[0].toFixed(1)}; ` +
    `${values.threads} threads; medians of ${reps} reps, ms`,
);
const head = ['prompt tokens', 'layout', 'whole', ...chunks.map((c) => `chunks of ${c}`)];
const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
for (const r of [head, ...rows]) console.log(r.map((c, i) => c.padEnd(widths[i])).join('  '));
