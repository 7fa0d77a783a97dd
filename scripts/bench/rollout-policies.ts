/**
 * Benchmark: the rollout work of exported policies on the same cases. Each policy plays the
 * training cases of each run seed's split (the first --cases of `runCases`, grpo.group_size
 * samples each, stage 1's temperature, workers.rollout.concurrency at once) on the onnx backend
 * with the config's settings, the policies and case sets alternating rep by rep, each rep on a
 * fresh backend. Counts what the backend ran: prefill runs and their prompt tokens (a prompt the
 * group's rows share is prefilled once), decode steps, the prompt groups and prefix positions a
 * decode step reads (prefix-cache.ts: rows of one prompt share its key/values, rows whose prompts
 * differ each hold their own). Prints the CPU model, cores, load, medians and each row's wall
 * against the first row's.
 *
 * Issue 29 experiment 24 asked why one run's rollouts take 1.45x another's on the same number of
 * generated tokens: this separates the policy from the cases.
 *
 *   npx tsx scripts/bench/rollout-policies.ts --policies runs/a/policies/v23,runs/b/policies/v23 [--case-seeds 0,1] [--cases 8] [--reps 3]
 */
import { cpus, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type * as ort from 'onnxruntime-node';
import { loadDataset } from '@thinkfl/env';
import { loadRunConfig } from '../../packages/trainer-ctl/src/config/index';
import { runCases } from '../../packages/trainer-ctl/src/controller/cases';
import { playSettingsFromConfig } from '../../packages/trainer-ctl/src/eval/solvers';
import { median, onOrtRuns, playOnFreshBackend } from './onnx-play';
import { REPO_ROOT } from '../../testkit/nezha';

const { values } = parseArgs({
  options: {
    /** Comma-separated exported policy directories (config.json, onnx/) of runs of --config. */
    policies: { type: 'string' },
    config: { type: 'string', default: join(REPO_ROOT, 'configs', 'tiny-cpu.yaml') },
    /** Run seeds whose split gives the training cases played. */
    'case-seeds': { type: 'string', default: '0,1' },
    /** Cases of each split played, grpo.group_size samples each. */
    cases: { type: 'string', default: '8' },
    /** Timed reps per (policy, cases), after one warm-up round. */
    reps: { type: 'string', default: '3' },
  },
});
if (!values.policies) throw new Error('--policies DIR,DIR is required (exported policies, e.g. runs/tiny-cpu/policies/v23)');
const file = resolve(values.config);
const config = loadRunConfig(file, { checkPaths: false }).config;
const backendSettings = config.generation.backend;
if (backendSettings.kind !== 'onnx')
  throw new Error(`${file}: generation.backend.kind is ${backendSettings.kind}; this bench measures the onnx backend`);
const dataset = await loadDataset(config.dataset.path);
const play = playSettingsFromConfig(file);
const concurrency = config.workers.rollout.concurrency;
const temperature = config.generation.temperature.priming;
const policies = values.policies.split(',').map((p) => resolve(p));
const caseSets = values['case-seeds']!.split(',').map((s) => {
  const seed = Number(s);
  const train = runCases(dataset, { ...config, run: { ...config.run, seed } }).train.slice(0, Number(values.cases));
  return { seed, episodes: train.flatMap((c) => Array.from({ length: config.grpo.group_size }, () => c)) };
});
const reps = Number(values.reps);

interface Rep {
  wallMs: number;
  prefillRuns: number;
  prefillTokens: number;
  decodeMs: number;
  decodeSteps: number;
  groups: number;
  prefixPositions: number;
}
let current: Rep | undefined;
// Every onnxruntime run, timed and sized: more than one new token is a prefill chunk; a decode step's
// prefix_mask [groups, width] gives the prompt groups and prefix positions it attends.
onOrtRuns((feeds, ms) => {
  const [rows, len] = feeds.input_ids.dims.map(Number);
  const prefix: ort.Tensor | undefined = feeds.prefix_mask;
  if (current && len > 1) {
    current.prefillRuns++;
    current.prefillTokens += rows * len;
  } else if (current) {
    current.decodeMs += ms;
    current.decodeSteps++;
    if (prefix) {
      current.groups += Number(prefix.dims[0]);
      current.prefixPositions += Number(prefix.dims[0]) * Number(prefix.dims[1]);
    }
  }
});

const combos = policies.flatMap((policy) => caseSets.map((cases) => ({ policy, cases })));
const results: Rep[][] = combos.map(() => []);
const loads = [loadavg()[0]];
for (let r = 0; r <= reps; r++) {
  for (const [k, { policy, cases }] of combos.entries()) {
    current = { wallMs: 0, prefillRuns: 0, prefillTokens: 0, decodeMs: 0, decodeSteps: 0, groups: 0, prefixPositions: 0 };
    current.wallMs = await playOnFreshBackend({
      dataset,
      episodes: cases.episodes,
      policyDir: policy,
      backend: {
        threads: backendSettings.threads,
        spin: backendSettings.spin,
        prompt_cache_mb: backendSettings.prompt_cache_mb,
        prefill_chunk: backendSettings.prefill_chunk,
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
    `${caseSets[0].episodes.length} episodes per row (${values.cases} cases x ${config.grpo.group_size}), ${concurrency} at once, ` +
    `temperature ${temperature}, ${backendSettings.threads} threads, ${reps} reps (medians; samples differ between reps)`,
);
const cols = ['wall s', 'prefill runs', 'prompt tokens run', 'decode steps', 'groups/step', 'prefix pos/step', 'ms/step', 'wall vs first'];
console.log(`${'policy, cases of seed'.padEnd(36)} ${cols.map((c) => c.padStart(c.length + 2)).join(' ')}`);
const base = median(results[0].map((x) => x.wallMs));
for (const [k, { policy, cases }] of combos.entries()) {
  const m = (f: (x: Rep) => number) => median(results[k].map(f));
  const cells = [
    (m((x) => x.wallMs) / 1000).toFixed(2),
    String(m((x) => x.prefillRuns)),
    String(m((x) => x.prefillTokens)),
    String(m((x) => x.decodeSteps)),
    m((x) => x.groups / x.decodeSteps).toFixed(2),
    m((x) => x.prefixPositions / x.decodeSteps).toFixed(0),
    m((x) => x.decodeMs / x.decodeSteps).toFixed(2),
    `${(m((x) => x.wallMs) / base).toFixed(2)}x`,
  ];
  const label = `${policy.split('/').slice(-3).join('/')}, ${cases.seed}`;
  console.log(`${label.padEnd(36)} ${cells.map((c, i) => c.padStart(cols[i].length + 2)).join(' ')}`);
}
