/**
 * Benchmark: where a batch-1 generation of the `onnx` backend spends its time, all in this run.
 *   - the prefill of a ~1.2k-token chat prompt on the decode graph, whole and in chunks of
 *     --chunk tokens as the backend runs it (prefillInChunks; of it, the time inside onnxruntime's
 *     runs, the rest being JavaScript: key/values joined chunk by chunk), against one forward of the
 *     model graph (onnx/model.onnx, what onnxruntime-genai and transformers.js run) on it;
 *   - how many operators onnxruntime runs for one batch-1 step of the decode graph (its profile of
 *     one run, after its graph optimizations): on a small model a step's cost is mostly per operator;
 *   - that step's session.run alone, repeated on the same feeds, threads sleeping and spinning: the
 *     part of the backend's step (below) spent in onnxruntime and its binding;
 *   - onnxruntime's profile of a cold prefill in chunks, whole, and on the model graph: runs,
 *     operator runs, time in kernels by operator type;
 *   - per generated token (onToken timestamps): the first token, the median step, the slowest
 *     step and how many steps took over 4 ms, with onnxruntime's intra-op threads sleeping
 *     between operators (the backend's default, spin: false) and spin-waiting (spin: true),
 *     alternating.
 * Prints medians over --reps generations of --tokens greedy tokens; give the load (uptime) with them.
 *
 *   npx tsx scripts/bench/onnx-decode-steps.ts [--model DIR] [--tokens N] [--reps N] [--threads N] [--chunk N]
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadDataset } from '@thinkfl/env';
import { openOnnxBackend, type OnnxBackend } from '@thinkfl/rollout';
import * as ort from 'onnxruntime-node';
import { loadDecodeGraph, loadOnnxCausalLM, readModelConfig } from '../../packages/rollout/src/backends/onnx/model';
import { SharedPrefixCache } from '../../packages/rollout/src/backends/onnx/prefix-cache';
import { prefillInChunks } from '../../packages/rollout/src/backends/onnx/scheduler';
import { ensureNezhaDataset } from '../../testkit/nezha';
import { decodePromptOf, ensureModel } from './peers/models';

const { values } = parseArgs({
  options: {
    /** Model directory; default the peers bench's tiny model (.cache/models/peers-tiny). */
    model: { type: 'string' },
    tokens: { type: 'string', default: '64' },
    reps: { type: 'string', default: '6' },
    /** onnxruntime intra-op threads. */
    threads: { type: 'string', default: '2' },
    /** Prefill chunk (generation.backend.prefill_chunk). */
    chunk: { type: 'string', default: '64' },
  },
});
const reps = Number(values.reps);
const threads = Number(values.threads);
const datasetDir = await ensureNezhaDataset();
const dataset = await loadDataset(datasetDir);
const modelDir = values.model ?? (await ensureModel('tiny', datasetDir));
const prompt = decodePromptOf(dataset, modelDir);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

const config = readModelConfig(modelDir);
// Threads sleep between operators (the backend's default): a session's spinning threads would take
// the cores from the other session's next run (before this, the model graph's forward ran right
// after the chunked prefill's threads, still spinning).
const decode = await loadDecodeGraph(`${modelDir}/onnx/decode.onnx`, config, { threads, spin: false });
const model = await loadOnnxCausalLM(`${modelDir}/onnx/model.onnx`, config, { threads, spin: false });
const cache = new SharedPrefixCache(decode, config.padId);
const t = prompt.length;
const i64 = (f: (i: number) => number) =>
  new ort.Tensor(
    'int64',
    BigInt64Array.from({ length: t }, (_, i) => BigInt(f(i))),
    [1, t],
  );
const feeds: Record<string, ort.Tensor> = { input_ids: i64((i) => prompt[i]), attention_mask: i64(() => 1), position_ids: i64((i) => i) };
for (const c of model.cache) feeds[c.input] = new ort.Tensor('float32', new Float32Array(0), [1, model.kvHeads, 0, model.headDim]);
// Time spent inside the decode graph's runs, to split a chunked prefill into onnxruntime and JavaScript.
let inRuns = 0;
const run = decode.session.run.bind(decode.session);
decode.session.run = (async (...args: Parameters<typeof run>) => {
  const t0 = performance.now();
  try {
    return await run(...args);
  } finally {
    inRuns += performance.now() - t0;
  }
}) as typeof run;
const chunk = Number(values.chunk);
const prefill: number[] = [];
const chunked: number[] = [];
const chunkedRuns: number[] = [];
const forward: number[] = [];
for (let k = 0; k <= reps; k++) {
  let t0 = performance.now();
  await cache.prefill(prompt);
  const a = performance.now() - t0;
  inRuns = 0;
  t0 = performance.now();
  await prefillInChunks(cache, prompt, chunk);
  const b = performance.now() - t0;
  t0 = performance.now();
  await model.session.run(feeds);
  if (k > 0) prefill.push(a), chunked.push(b), chunkedRuns.push(inRuns), forward.push(performance.now() - t0);
}
console.log(`${modelDir}, prompt ${t} tokens, ${threads} threads, median of ${reps}`);
console.log(
  `prefill on the decode graph ${median(prefill).toFixed(1)} ms whole, ${median(chunked).toFixed(1)} ms in chunks of ${chunk} ` +
    `(${Math.ceil(t / chunk)} runs: ${median(chunkedRuns).toFixed(1)} ms in onnxruntime), model graph forward ${median(forward).toFixed(1)} ms`,
);

interface ProfileEvent {
  cat: string;
  name: string;
  /** Microseconds from the session's start, and taken. */
  ts: number;
  dur: number;
  args?: { op_name?: string };
}

/** onnxruntime's profile of what `body` runs on a profiling session of the graph at `path`. */
async function profiled(path: string, body: (session: ort.InferenceSession) => Promise<void>): Promise<ProfileEvent[]> {
  const dir = mkdtempSync(join(tmpdir(), 'decode-profile-'));
  try {
    const session = await ort.InferenceSession.create(path, {
      intraOpNumThreads: threads,
      interOpNumThreads: 1,
      graphOptimizationLevel: 'all',
      enableProfiling: true,
      profileFilePrefix: join(dir, 'profile'),
      // The backend's default: threads sleep between operators.
      extra: { session: { intra_op: { allow_spinning: '0' } } },
    });
    await body(session);
    session.endProfiling();
    await session.release();
    return JSON.parse(readFileSync(join(dir, readdirSync(dir)[0]), 'utf8'));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const kernels = (events: ProfileEvent[]) => events.filter((e) => e.cat === 'Node' && e.name.endsWith('_kernel_time'));

/** The feeds of one batch-1 decode step on the prompt's key/values (an empty suffix slot, masked). */
async function stepFeeds(): Promise<Record<string, ort.Tensor>> {
  const { prefill } = await cache.prefill(prompt);
  const one = (v: number) => new ort.Tensor('int64', BigInt64Array.of(BigInt(v)), [1, 1]);
  const step: Record<string, ort.Tensor> = {
    input_ids: one(prompt[t - 1]),
    position_ids: one(t),
    prefix_mask: new ort.Tensor('float32', new Float32Array(t), [1, t]),
    suffix_mask: new ort.Tensor('float32', Float32Array.of(-Infinity), [1, 1]),
  };
  decode.prefix.forEach((name, c) => (step[name] = prefill.kv[c]));
  for (const name of decode.suffix)
    step[name] = new ort.Tensor('float32', new Float32Array(decode.kvHeads * decode.headDim), [1, decode.kvHeads, 1, 1, decode.headDim]);
  return step;
}
const step = await stepFeeds();
const operators = kernels(await profiled(decode.path, async (session) => void (await session.run(step)))).length;
console.log(`decode graph: ${operators} operators a batch-1 step (onnxruntime's profile of one run)`);

/**
 * One batch-1 step's session.run alone, the same feeds every time: what onnxruntime and the
 * binding's call cost without the backend's own work between steps (feeds, the new key/values
 * written into the suffix, the pick); threads sleeping (the backend's default) and spinning.
 */
async function bareStep(spin: boolean): Promise<number> {
  const g = await loadDecodeGraph(`${modelDir}/onnx/decode.onnx`, config, { threads, spin });
  const times: number[] = [];
  for (let k = 0; k < 200; k++) {
    const t0 = performance.now();
    await g.session.run(step);
    if (k >= 20) times.push(performance.now() - t0);
  }
  await g.session.release();
  return median(times);
}
const bare = { sleeping: await bareStep(false), spinning: await bareStep(true) };
console.log(
  `a step's session.run alone (median of 180): threads sleeping ${bare.sleeping.toFixed(3)} ms, spinning ${bare.spinning.toFixed(3)} ms`,
);

/**
 * Where a cold prefill's time goes inside onnxruntime: its profile of a second prefill (the first
 * warms the session) in chunks on the decode graph, or of a forward of the model graph, as runs,
 * operator runs, time in runs, time in kernels (the rest of a run is onnxruntime's own per-run
 * work: inputs, allocation, threads) and the kernels' time by operator type. Profiling adds its
 * own cost to every operator run, so compare the two, not against the timings above.
 */
async function prefillProfile(label: string, path: string, once: (session: ort.InferenceSession) => Promise<void>): Promise<string> {
  const events = await profiled(path, async (session) => {
    await once(session);
    await once(session);
  });
  const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run');
  const last = runs.slice(runs.length / 2);
  const ks = kernels(events).filter((k) => k.ts >= last[0].ts);
  const byType = new Map<string, number>();
  for (const k of ks) byType.set(k.args?.op_name ?? '?', (byType.get(k.args?.op_name ?? '?') ?? 0) + k.dur);
  const ms = (us: number) => (us / 1000).toFixed(1);
  const top = [...byType].sort((a, b) => b[1] - a[1]).slice(0, 6);
  return (
    `${label}: ${last.length} runs, ${ks.length} operator runs, ${ms(last.reduce((a, r) => a + r.dur, 0))} ms in runs, ` +
    `${ms(ks.reduce((a, k) => a + k.dur, 0))} ms in kernels (${top.map(([k, v]) => `${k} ${ms(v)}`).join(', ')})`
  );
}
const profiledDecode = async (session: ort.InferenceSession) =>
  void (await prefillInChunks(new SharedPrefixCache({ ...decode, session }, config.padId), prompt, chunk));
console.log(`profile of a cold prefill (onnxruntime's, ${threads} threads):`);
console.log(`  ${await prefillProfile(`decode graph in chunks of ${chunk}`, decode.path, profiledDecode)}`);
console.log(
  `  ${await prefillProfile('decode graph whole', decode.path, async (session) => void (await new SharedPrefixCache({ ...decode, session }, config.padId).prefill(prompt)))}`,
);
console.log(`  ${await prefillProfile('model graph whole', model.onnxPath, async (session) => void (await session.run(feeds)))}`);

await decode.session.release();
await model.session.release();

interface Gen {
  total: number;
  first: number;
  step: number;
  worst: number;
  slow: number;
}
async function generation(b: OnnxBackend): Promise<Gen> {
  const stamps: number[] = [];
  const t0 = performance.now();
  await b.generate([
    { promptIds: prompt, sampling: { max_tokens: Number(values.tokens), temperature: 0 }, onToken: () => stamps.push(performance.now()) },
  ]);
  const total = performance.now() - t0;
  const gaps = stamps.slice(1).map((s, i) => s - stamps[i]);
  return { total, first: stamps[0] - t0, step: median(gaps), worst: Math.max(...gaps), slow: gaps.filter((g) => g > 4).length };
}
const backends = {
  sleeping: await openOnnxBackend({ model_dir: modelDir, threads }),
  spinning: await openOnnxBackend({ model_dir: modelDir, threads, spin: true }),
};
const runs: Record<string, Gen[]> = { sleeping: [], spinning: [] };
for (let k = 0; k <= reps; k++) {
  for (const [name, b] of Object.entries(backends)) {
    const g = await generation(b);
    if (k > 0) runs[name].push(g);
  }
}
for (const [name, gs] of Object.entries(runs)) {
  const m = (f: (g: Gen) => number) => median(gs.map(f));
  console.log(
    `threads ${name.padEnd(8)}: ${values.tokens} tokens in ${m((g) => g.total).toFixed(0)} ms, first token ${m((g) => g.first).toFixed(0)} ms, ` +
      `step median ${m((g) => g.step).toFixed(2)} ms, slowest ${m((g) => g.worst).toFixed(1)} ms, ${m((g) => g.slow)} steps over 4 ms`,
  );
}
await backends.sleeping.close();
await backends.spinning.close();
