/**
 * Benchmark: where the `onnx` backend's batch-1 greedy generation spends its time on the main
 * thread, inside onnxruntime's run (onnxruntime-node's run is synchronous: its self time is the
 * graph's run) or in the backend's JavaScript between steps (feeds, the new key/values written into
 * the suffix, the pick). V8's sampling profiler over --gens generations of --tokens tokens on the
 * peers bench's ~1.2k-token decode prompt, after warm-up ones; the prompt cache on (the default), so
 * after the first generation a step is all there is. Prints the generation time and the top
 * functions by self time, each as ms a token.
 *
 *   npx tsx scripts/bench/onnx-decode-profile.ts [--model DIR] [--tokens N] [--gens N] [--threads N] [--spin]
 */
import { Session } from 'node:inspector/promises';
import { parseArgs } from 'node:util';
import { loadDataset } from '@thinkfl/env';
import { openOnnxBackend } from '@thinkfl/rollout';
import { ensureNezhaDataset } from '../../testkit/nezha';
import { decodePromptOf, ensureModel } from './peers/models';

const { values } = parseArgs({
  options: {
    /** Model directory; default the peers bench's tiny model (.cache/models/peers-tiny). */
    model: { type: 'string' },
    tokens: { type: 'string', default: '64' },
    gens: { type: 'string', default: '100' },
    /** onnxruntime intra-op threads. */
    threads: { type: 'string', default: '2' },
    /** onnxruntime's threads spin-wait between operators (the backend's spin: true). */
    spin: { type: 'boolean', default: false },
  },
});
const tokens = Number(values.tokens);
const gens = Number(values.gens);
const datasetDir = await ensureNezhaDataset();
const dataset = await loadDataset(datasetDir);
const modelDir = values.model ?? (await ensureModel('tiny', datasetDir));
const prompt = decodePromptOf(dataset, modelDir);
const backend = await openOnnxBackend({ model_dir: modelDir, threads: Number(values.threads), spin: values.spin });
const generate = async () => {
  const [g] = await backend.generate([{ promptIds: prompt, sampling: { max_tokens: tokens, temperature: 0 } }]);
  return g.tokenIds.length;
};
for (let k = 0; k < 5; k++) await generate();

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}
const inspector = new Session();
inspector.connect();
await inspector.post('Profiler.enable');
await inspector.post('Profiler.setSamplingInterval', { interval: 100 });
await inspector.post('Profiler.start');
const t0 = performance.now();
let steps = 0;
for (let k = 0; k < gens; k++) steps += await generate();
const ms = performance.now() - t0;
const { profile } = (await inspector.post('Profiler.stop')) as {
  profile: { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] };
};
inspector.disconnect();
await backend.close();

const frames = new Map(profile.nodes.map((n) => [n.id, n.callFrame]));
const self = new Map<string, number>();
profile.samples.forEach((id, i) => {
  const f = frames.get(id)!;
  const key = `${f.functionName || '(anonymous)'} ${f.url.split('/').slice(-2).join('/')}:${f.lineNumber + 1}`;
  self.set(key, (self.get(key) ?? 0) + profile.timeDeltas[i] / 1000);
});
console.log(
  `${modelDir}, prompt ${prompt.length} tokens (cached after the first generation), ${values.threads} threads, spin ${values.spin}: ` +
    `${gens} generations, ${steps} tokens in ${ms.toFixed(0)} ms, ${(ms / steps).toFixed(3)} ms a token`,
);
console.log('self time on the main thread, ms a token (V8 sampling profiler):');
for (const [key, t] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 12))
  console.log(`  ${(t / steps).toFixed(3)}  ${((100 * t) / ms).toFixed(1).padStart(5)}%  ${key}`);
