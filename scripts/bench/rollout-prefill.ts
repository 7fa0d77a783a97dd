/**
 * Benchmark: the onnx backend's prompt cache on a GRPO step's episodes (grpo.cases_per_step cases
 * x grpo.group_size samples at stage 1's temperature, workers.rollout.concurrency at once) of an
 * exported policy: without the cache and prompts prefilled whole (the backend before issue 29,
 * the baseline), without the cache in chunks, and with the cache (generation.backend.prompt_cache_mb)
 * at several generation.backend.prefill_chunk sizes, alternating rep by rep, each rep on a fresh
 * backend as each GRPO step's new policy version is. Splits each rep's onnxruntime time into prefills (runs that feed more than one new
 * token) and decode steps, and counts the prompt tokens the prefills ran. Prints the CPU model,
 * cores, load average, medians and the ratio to the run without the cache.
 *
 *   npx tsx scripts/bench/rollout-prefill.ts --policy runs/tiny-cpu/policies/v27 [--config configs/tiny-cpu.yaml] [--reps 4]
 */
import { cpus, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { loadDataset, spreadCases } from '@thinkfl/env';
import type { OnnxSettings } from '@thinkfl/rollout';
import { loadRunConfig } from '../../packages/trainer-ctl/src/config/index';
import { playSettingsFromConfig } from '../../packages/trainer-ctl/src/eval/solvers';
import { median, onOrtRuns, playOnFreshBackend } from './onnx-play';
import { REPO_ROOT } from '../../testkit/nezha';

const { values } = parseArgs({
  options: {
    /** An exported policy directory (config.json, onnx/) of a run of --config. */
    policy: { type: 'string' },
    config: { type: 'string', default: join(REPO_ROOT, 'configs', 'tiny-cpu.yaml') },
    /** Timed reps per setting, after one warm-up each. */
    reps: { type: 'string', default: '4' },
  },
});
if (!values.policy) throw new Error('--policy DIR is required (an exported policy, e.g. runs/tiny-cpu/policies/v27)');
const file = resolve(values.config);
const config = loadRunConfig(file, { checkPaths: false }).config;
const backendSettings = config.generation.backend;
if (backendSettings.kind !== 'onnx')
  throw new Error(`${file}: generation.backend.kind is ${backendSettings.kind}; this bench measures the onnx backend`);
const reps = Number(values.reps);
const policyDir = resolve(values.policy);

const dataset = await loadDataset(config.dataset.path);
const cases = spreadCases(dataset.cases, config.grpo.cases_per_step);
const episodes = cases.flatMap((c) => Array.from({ length: config.grpo.group_size }, () => c));
const play = playSettingsFromConfig(file);
const concurrency = config.workers.rollout.concurrency;
const temperature = config.generation.temperature.priming;

interface Rep {
  wallMs: number;
  prefillMs: number;
  prefillTokens: number;
  decodeMs: number;
  decodeSteps: number;
}
let current: Rep | undefined;
// Every onnxruntime run of the backend, timed: a prefill chunk feeds the prompt's new tokens, a decode step one token a
// row (a one-token chunk counts as a decode step: one prompt in `prefill_chunk` ends with one).
onOrtRuns((feeds, ms) => {
  const tokens = feeds.input_ids.dims[1];
  if (current && tokens > 1) {
    current.prefillMs += ms;
    current.prefillTokens += tokens;
  } else if (current) {
    current.decodeMs += ms;
    current.decodeSteps++;
  }
});

// The first row is the backend before issue 29's cache: every prompt prefilled whole, from nothing.
const WHOLE = 1 << 30;
const settings: ({ name: string } & Pick<OnnxSettings, 'prompt_cache_mb' | 'prefill_chunk'>)[] = [
  { name: 'no cache, whole prompts', prompt_cache_mb: 0, prefill_chunk: WHOLE },
  { name: 'no cache, chunks of 128', prompt_cache_mb: 0, prefill_chunk: 128 },
  { name: 'cache, chunks of 32', prompt_cache_mb: 256, prefill_chunk: 32 },
  { name: 'cache, chunks of 64', prompt_cache_mb: 256, prefill_chunk: 64 },
  { name: 'cache, chunks of 128', prompt_cache_mb: 256, prefill_chunk: 128 },
];
const results: Rep[][] = settings.map(() => []);
const loads = [loadavg()[0]];
for (let r = 0; r <= reps; r++) {
  for (const [k, s] of settings.entries()) {
    current = { wallMs: 0, prefillMs: 0, prefillTokens: 0, decodeMs: 0, decodeSteps: 0 };
    current.wallMs = await playOnFreshBackend({
      dataset,
      episodes,
      policyDir,
      backend: {
        threads: backendSettings.threads,
        spin: backendSettings.spin,
        prompt_cache_mb: s.prompt_cache_mb,
        prefill_chunk: s.prefill_chunk,
      },
      play,
      concurrency,
      temperature,
    });
    if (r > 0) results[k].push(current);
    current = undefined;
  }
  loads.push(loadavg()[0]);
}

console.log(
  `CPU: ${cpus()[0]?.model ?? 'unknown'}, ${cpus().length} cores; load average (1 min) ${loads.map((x) => x.toFixed(1)).join(' -> ')}; ` +
    `${episodes.length} episodes a step (${cases.length} cases x ${config.grpo.group_size}), ${concurrency} at once, temperature ${temperature}, ` +
    `${backendSettings.threads} threads, ${reps} reps (medians; samples differ between reps)`,
);
const cols = ['wall s', 'prefill s', 'prompt tokens run', 'decode s', 'decode steps', 'wall vs first'];
console.log(`${''.padEnd(24)} ${cols.map((c) => c.padStart(c.length + 2)).join(' ')}`);
const base = median(results[0].map((x) => x.wallMs));
for (const [k, s] of settings.entries()) {
  const m = (f: (x: Rep) => number) => median(results[k].map(f));
  const cells = [
    (m((x) => x.wallMs) / 1000).toFixed(2),
    (m((x) => x.prefillMs) / 1000).toFixed(2),
    String(m((x) => x.prefillTokens)),
    (m((x) => x.decodeMs) / 1000).toFixed(2),
    String(m((x) => x.decodeSteps)),
    `${(m((x) => x.wallMs) / base).toFixed(2)}x`,
  ];
  console.log(`${s.name.padEnd(24)} ${cells.map((c, i) => c.padStart(cols[i].length + 2)).join(' ')}`);
}
