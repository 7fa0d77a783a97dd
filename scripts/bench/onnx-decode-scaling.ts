/**
 * Benchmark: what one decode step of the `onnx` backend's model costs per row as the cache
 * grows, at batch 1 and batch 8, all measured in this run. It shows how much batching can gain
 * at a context length: where the step's cost grows with batch x context (the exported graph
 * concatenates, expands and transposes each row's whole cache every step), batch 8 yields
 * little more than batch 1 per second. The second figure fetches only the logits, so the
 * present key/values are not copied into JavaScript: the most that keeping the cache inside
 * onnxruntime (IO binding) could save on this graph.
 *
 *   npx tsx scripts/bench/onnx-decode-scaling.ts [--model DIR] [--contexts 64,256,1024] [--reps N] [--threads N]
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as ort from 'onnxruntime-node';
import { loadOnnxCausalLM, locateOnnx, readModelConfig } from '../../packages/rollout/src/backends/onnx/model';
import { ensureNezhaDataset, REPO_ROOT } from '../../testkit/nezha';

const { values } = parseArgs({
  options: {
    /** Model directory to measure; default a fresh tiny model from scripts/create-tiny-model.ts. */
    model: { type: 'string' },
    /** Cached positions per row before the measured step. */
    contexts: { type: 'string', default: '64,256,1024' },
    /** Timed steps per measurement (the median is printed). */
    reps: { type: 'string', default: '9' },
    /** onnxruntime intra-op threads (0: all cores), as the backend's `threads`. */
    threads: { type: 'string', default: '0' },
  },
});
const reps = Number(values.reps);
const contexts = values.contexts.split(',').map(Number);

let modelDir = values.model;
if (!modelDir) {
  modelDir = join(mkdtempSync(join(tmpdir(), 'bench-decode-')), 'tiny');
  execFileSync(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'scripts', 'create-tiny-model.ts'), '--dataset', await ensureNezhaDataset(), '--out', modelDir], { stdio: 'inherit' });
}
const config = readModelConfig(modelDir);
const model = await loadOnnxCausalLM(locateOnnx(modelDir).onnxPath, config, { threads: Number(values.threads) });
if (model.cache.length === 0) throw new Error(`${modelDir}: the export has no KV cache`);

const int64 = (v: number[], dims: number[]) => new ort.Tensor('int64', BigInt64Array.from(v, (x) => BigInt(x)), dims);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** Median ms of one decode step of `rows` rows on `context` cached positions each. */
async function stepMs(rows: number, context: number, fetchCache: boolean): Promise<number> {
  const feeds: Record<string, ort.Tensor> = {
    input_ids: int64(Array(rows).fill(config.eosIds[0] ?? 1), [rows, 1]),
    attention_mask: int64(Array(rows * (context + 1)).fill(1), [rows, context + 1]),
  };
  if (model.hasPositionIds) feeds.position_ids = int64(Array(rows).fill(context), [rows, 1]);
  const size = rows * model.kvHeads * context * model.headDim;
  for (const c of model.cache) feeds[c.input] = new ort.Tensor('float32', Float32Array.from({ length: size }, (_, i) => Math.sin(i) * 0.1), [rows, model.kvHeads, context, model.headDim]);
  const fetches = fetchCache ? model.session.outputNames : ['logits'];
  await model.session.run(feeds, fetches);
  const ms: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    await model.session.run(feeds, fetches);
    ms.push(performance.now() - t0);
  }
  return median(ms);
}

console.log(`model ${modelDir}: ${config.layers} layers, ${config.kvHeads} KV heads x ${config.headDim}, vocab ${config.vocabSize}; median of ${reps} steps`);
for (const context of contexts) {
  for (const fetchCache of [true, false]) {
    const one = await stepMs(1, context, fetchCache);
    const eight = await stepMs(8, context, fetchCache);
    const what = fetchCache ? 'logits + present cache' : 'logits only          ';
    console.log(
      `context ${String(context).padStart(5)}, ${what}: batch 1 ${one.toFixed(2).padStart(7)} ms/step (${(1000 / one).toFixed(0).padStart(5)} tokens/s), ` +
        `batch 8 ${eight.toFixed(2).padStart(7)} ms/step (${((8 * 1000) / eight).toFixed(0).padStart(5)} tokens/s, ${((8 * one) / eight).toFixed(2)}x batch 1)`,
    );
  }
}
await model.session.release();
