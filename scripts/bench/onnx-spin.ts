/**
 * Benchmark: the onnx backend's decode with onnxruntime's intra-op threads sleeping between
 * operators (its default, spin: false), spin-waiting (spin: true, onnxruntime's own default, which
 * also spins for a while after each run), and spin-waiting only within a run
 * (session.force_spinning_stop, which spin: true plus that config entry gives; not a backend
 * setting, injected here), alternating, on a quiet machine or beside --busy busy-loop processes
 * (cores shared with other work, as in a training run). Greedy, 64 new tokens a row on the peers
 * bench's tiny model and ~1.2k-token prompt, batch 1 and 8, every run prefilling (prompt cache off).
 *
 *   npx tsx scripts/bench/onnx-spin.ts [--busy N] [--reps N] [--threads N]
 */
import { fork } from 'node:child_process';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import * as ort from 'onnxruntime-node';
import { loadDataset } from '@thinkfl/env';
import { openOnnxBackend, type OnnxBackend } from '@thinkfl/rollout';
import { ensureNezhaDataset } from '../../testkit/nezha';
import { machine, machineLine } from './peers/measure';
import { decodePromptOf, ensureModel } from './peers/models';

const { values } = parseArgs({
  options: {
    /** Busy-loop processes running beside the backend for the whole measurement. */
    busy: { type: 'string', default: '0' },
    reps: { type: 'string', default: '6' },
    threads: { type: 'string', default: '2' },
  },
});
const datasetDir = await ensureNezhaDataset();
const dataset = await loadDataset(datasetDir);
const modelDir = await ensureModel('tiny', datasetDir);
const prompt = decodePromptOf(dataset, modelDir);

const create = ort.InferenceSession.create.bind(ort.InferenceSession);
let stopAfterRuns = false;
type CreateArgs = [string, ort.InferenceSession.SessionOptions];
(ort.InferenceSession as unknown as { create: (...a: CreateArgs) => Promise<ort.InferenceSession> }).create = (path, opts) => {
  if (!stopAfterRuns) return create(path, opts);
  const extra = (opts.extra ?? {}) as { session?: Record<string, unknown> };
  return create(path, { ...opts, extra: { ...extra, session: { ...extra.session, force_spinning_stop: '1' } } });
};
const common = { model_dir: modelDir, threads: Number(values.threads), prompt_cache_mb: 0, max_batch: 8 };
const backends: [string, OnnxBackend][] = [
  ['sleeping', await openOnnxBackend(common)],
  ['spinning', await openOnnxBackend({ ...common, spin: true })],
];
stopAfterRuns = true;
backends.push(['spinning within runs', await openOnnxBackend({ ...common, spin: true })]);

const busy = Array.from({ length: Number(values.busy) }, () => fork('-e', ['for (;;);'], { execArgv: [], stdio: 'ignore' }));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
try {
  console.log(`${machineLine(machine())}; ${values.threads} threads; ${values.busy} busy-loop processes beside; medians of ${values.reps}`);
  for (const batch of [1, 8]) {
    const ms = new Map<string, number[]>(backends.map(([n]) => [n, []]));
    for (let k = 0; k <= Number(values.reps); k++) {
      for (let j = 0; j < backends.length; j++) {
        const [name, b] = backends[(j + k) % backends.length];
        const t0 = performance.now();
        await b.generate(Array.from({ length: batch }, () => ({ promptIds: prompt, sampling: { max_tokens: 64, temperature: 0 } })));
        if (k > 0) ms.get(name)!.push(performance.now() - t0);
      }
    }
    const cells = backends.map(([n]) => `${n} ${((64 * batch) / (median(ms.get(n)!) / 1000)).toFixed(0)} tokens/s`);
    console.log(`batch ${batch}: ${cells.join(', ')}; load average ${loadavg()[0].toFixed(1)}`);
  }
} finally {
  for (const p of busy) p.kill();
  for (const [, b] of backends) await b.close();
}
