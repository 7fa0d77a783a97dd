/**
 * Benchmark: what one decode step of the `onnx` backend's model costs as the cache grows, at
 * batch 1 and batch 8, all measured in this run, on its two graphs:
 *   - the model graph (onnx/model.onnx, past in, present out), which every export has and the
 *     backend decodes on when there is no decode graph: each row's whole cache is read, copied
 *     into the present (concatenated, expanded, transposed) and returned to JavaScript;
 *   - the decode-step graph (onnx/decode.onnx), which the trainer's export adds: a prompt's
 *     key/values are read once for the rows that share it and only the step's own come back.
 * Batch 8 is 8 rows of one prompt (a GRPO group) and, on the decode graph, also 8 rows of 8
 * prompts (episodes of different cases), where nothing is shared but the weights.
 *
 *   npx tsx scripts/bench/onnx-decode-scaling.ts [--model DIR] [--contexts 64,256,1024] [--reps N] [--threads N]
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import * as ort from 'onnxruntime-node';
import {
  decodeGraphPath,
  loadDecodeGraph,
  loadOnnxCausalLM,
  locateOnnx,
  readModelConfig,
} from '../../packages/rollout/src/backends/onnx/model';
import { ensureNezhaDataset, REPO_ROOT } from '../../testkit/nezha';

const { values } = parseArgs({
  options: {
    /** Model directory to measure; default a fresh tiny model from scripts/create-tiny-model.ts. */
    model: { type: 'string' },
    /** Cached prompt positions per row before the measured step. */
    contexts: { type: 'string', default: '64,256,1024' },
    /** Timed steps per measurement (the median is printed). */
    reps: { type: 'string', default: '9' },
    /** onnxruntime intra-op threads (0: all cores), as the backend's `threads`. */
    threads: { type: 'string', default: '0' },
  },
});
const reps = Number(values.reps);
const contexts = values.contexts.split(',').map(Number);
/** Generated tokens already in each row's own cache on the decode graph (its suffix), of 32 positions. */
const GENERATED = 16;

let modelDir = values.model;
if (!modelDir) {
  modelDir = join(mkdtempSync(join(tmpdir(), 'bench-decode-')), 'tiny');
  execFileSync(
    process.execPath,
    ['--import', 'tsx', join(REPO_ROOT, 'scripts', 'create-tiny-model.ts'), '--dataset', await ensureNezhaDataset(), '--out', modelDir],
    { stdio: 'inherit' },
  );
}
const config = readModelConfig(modelDir);
const { onnxPath } = locateOnnx(modelDir);
const threads = Number(values.threads);
const model = await loadOnnxCausalLM(onnxPath, config, { threads });
if (model.cache.length === 0) throw new Error(`${modelDir}: the export has no KV cache`);
const decodePath = decodeGraphPath(onnxPath);
const decode = decodePath ? await loadDecodeGraph(decodePath, config, { threads }) : undefined;

const int64 = (v: number[], dims: number[]) =>
  new ort.Tensor(
    'int64',
    BigInt64Array.from(v, (x) => BigInt(x)),
    dims,
  );
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const noise = (size: number) => Float32Array.from({ length: size }, (_, i) => Math.sin(i) * 0.1);
const eos = config.eosIds[0] ?? 1;

async function timeRun(session: ort.InferenceSession, feeds: Record<string, ort.Tensor>, fetches: readonly string[]): Promise<number> {
  await session.run(feeds, fetches);
  const ms: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    await session.run(feeds, fetches);
    ms.push(performance.now() - t0);
  }
  return median(ms);
}

/** Median ms of one step of the model graph: `rows` rows on `context` cached positions each. */
function modelGraphMs(rows: number, context: number): Promise<number> {
  const feeds: Record<string, ort.Tensor> = {
    input_ids: int64(Array(rows).fill(eos), [rows, 1]),
    attention_mask: int64(Array(rows * (context + 1)).fill(1), [rows, context + 1]),
  };
  if (model.hasPositionIds) feeds.position_ids = int64(Array(rows).fill(context), [rows, 1]);
  for (const c of model.cache)
    feeds[c.input] = new ort.Tensor('float32', noise(rows * model.kvHeads * context * model.headDim), [
      rows,
      model.kvHeads,
      context,
      model.headDim,
    ]);
  return timeRun(model.session, feeds, model.session.outputNames);
}

/** Median ms of one step of the decode graph: `groups` prompts of `context` positions, `perGroup` rows each. */
function decodeGraphMs(groups: number, perGroup: number, context: number): Promise<number> {
  const g = decode!;
  const rows = groups * perGroup;
  const cap = 2 * GENERATED;
  const suffixMask = new Float32Array(rows * cap).fill(-Infinity);
  for (let r = 0; r < rows; r++) suffixMask.fill(0, r * cap, r * cap + GENERATED);
  const feeds: Record<string, ort.Tensor> = {
    input_ids: int64(Array(rows).fill(eos), [rows, 1]),
    position_ids: int64(Array(rows).fill(context + GENERATED), [rows, 1]),
    prefix_mask: new ort.Tensor('float32', new Float32Array(groups * context), [groups, context]),
    suffix_mask: new ort.Tensor('float32', suffixMask, [rows, cap]),
  };
  for (const name of g.prefix)
    feeds[name] = new ort.Tensor('float32', noise(groups * model.kvHeads * context * model.headDim), [
      groups,
      model.kvHeads,
      context,
      model.headDim,
    ]);
  for (const name of g.suffix)
    feeds[name] = new ort.Tensor('float32', noise(rows * model.kvHeads * cap * model.headDim), [
      groups,
      model.kvHeads,
      perGroup,
      cap,
      model.headDim,
    ]);
  return timeRun(g.session, feeds, ['logits', ...g.fresh]);
}

const line = (what: string, one: number, eight: number) =>
  `${what}: batch 1 ${one.toFixed(2).padStart(7)} ms/step (${(1000 / one).toFixed(0).padStart(5)} tokens/s), ` +
  `batch 8 ${eight.toFixed(2).padStart(7)} ms/step (${((8 * 1000) / eight).toFixed(0).padStart(5)} tokens/s, ${((8 * one) / eight).toFixed(2)}x batch 1)`;

console.log(
  `model ${modelDir}: ${config.layers} layers, ${config.kvHeads} KV heads x ${config.headDim}, vocab ${config.vocabSize}; median of ${reps} steps`,
);
if (!decode) console.log('no decode graph (onnx/decode.onnx) in this export: the model graph only');
for (const context of contexts) {
  const c = `context ${String(context).padStart(5)}`;
  console.log(line(`${c}, model graph,  one prompt `, await modelGraphMs(1, context), await modelGraphMs(8, context)));
  if (!decode) continue;
  const one = await decodeGraphMs(1, 1, context);
  console.log(line(`${c}, decode graph, one prompt `, one, await decodeGraphMs(1, 8, context)));
  console.log(line(`${c}, decode graph, 8 prompts  `, one, await decodeGraphMs(8, 1, context)));
}
await model.session.release();
await decode?.session.release();
