/**
 * Benchmark: the episodes of one GRPO step of a run config (grpo.cases_per_step cases x
 * grpo.group_size samples, at stage 1's temperature) played by an exported policy on the onnx
 * backend, at several (episodes at once, onnxruntime threads) settings against the config's own
 * workers.rollout.concurrency and generation.backend.threads, measured in this run with the
 * settings alternating rep by rep. Prints the CPU model, cores, load average, the median wall
 * seconds per step and the ratio to the config's setting.
 *
 *   npx tsx scripts/bench/rollout-concurrency.ts --policy runs/tiny-cpu/policies/v32 [--config configs/tiny-cpu.yaml] [--reps 3] [--settings 2x1,4x1,8x1,8x2,16x1]
 */
import { cpus, loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { evaluate, loadDataset, spreadCases } from '@thinkfl/env';
import { loadRunConfig } from '../../packages/trainer-ctl/src/config/index';
import { openSolver, playSettingsFromConfig, type OpenedSolver } from '../../packages/trainer-ctl/src/eval/solvers';
import { REPO_ROOT } from '../../testkit/nezha';

const { values } = parseArgs({
  options: {
    /** An exported policy directory (config.json, onnx/) of a run of --config. */
    policy: { type: 'string' },
    config: { type: 'string', default: join(REPO_ROOT, 'configs', 'tiny-cpu.yaml') },
    /** Timed steps per setting. */
    reps: { type: 'string', default: '3' },
    /** Comma-separated CONCURRENCYxTHREADS settings besides the config's. */
    settings: { type: 'string', default: '4x1,8x1,16x1,16x2' },
  },
});
if (!values.policy) throw new Error('--policy DIR is required (an exported policy, e.g. runs/tiny-cpu/policies/v32)');
const file = resolve(values.config);
const config = loadRunConfig(file, { checkPaths: false }).config;
const backend = config.generation.backend;
if (backend.kind !== 'onnx') throw new Error(`${file}: generation.backend.kind is ${backend.kind}; this bench measures the onnx backend`);
const own = `${config.workers.rollout.concurrency}x${backend.threads}`;
const settings = [own, ...values.settings!.split(',').filter((s) => s && s !== own)].map((s) => {
  const [c, t] = s.split('x').map(Number);
  if (!Number.isInteger(c) || c < 1 || !Number.isInteger(t) || t < 0) throw new Error(`--settings: ${s} is not CONCURRENCYxTHREADS`);
  return { name: s, concurrency: c, threads: t };
});
const reps = Number(values.reps);

const dataset = await loadDataset(config.dataset.path);
const cases = spreadCases(dataset.cases, config.grpo.cases_per_step);
const episodes = cases.flatMap((c) => Array.from({ length: config.grpo.group_size }, () => c));
const fromConfig = playSettingsFromConfig(file);
const temperature = config.generation.temperature.priming;

const solvers: OpenedSolver[] = [];
try {
  for (const s of settings) {
    solvers.push(
      await openSolver(
        dataset,
        { kind: 'onnx', dir: resolve(values.policy) },
        { ...fromConfig, temperature, concurrency: s.concurrency, threads: s.threads },
      ),
    );
  }
  const seconds: number[][] = settings.map(() => []);
  const loads = [loadavg()[0]];
  // Rep 0 warms each setting up (session creation, first prefill); then the settings alternate.
  for (let r = 0; r <= reps; r++) {
    for (const [k, s] of settings.entries()) {
      const t0 = performance.now();
      await evaluate(dataset, episodes, solvers[k].solve, { concurrency: s.concurrency });
      if (r > 0) seconds[k].push((performance.now() - t0) / 1000);
    }
    loads.push(loadavg()[0]);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  console.log(
    `CPU: ${cpus()[0]?.model ?? 'unknown'}, ${cpus().length} cores; load average (1 min) ${loads.map((x) => x.toFixed(1)).join(' -> ')}; ` +
      `${episodes.length} episodes a step (${cases.length} cases x ${config.grpo.group_size}), temperature ${temperature}, ${reps} reps`,
  );
  const base = median(seconds[0]);
  console.log(`${'episodes x threads'.padEnd(20)} ${'median s'.padStart(9)} ${'min s'.padStart(7)} ${'vs config'.padStart(9)}`);
  for (const [k, s] of settings.entries()) {
    const m = median(seconds[k]);
    console.log(
      `${(s.name + (k === 0 ? ' (config)' : '')).padEnd(20)} ${m.toFixed(2).padStart(9)} ${Math.min(...seconds[k])
        .toFixed(2)
        .padStart(7)} ${(m / base).toFixed(2).padStart(8)}x`,
    );
  }
} finally {
  for (const s of solvers) await s.close();
}
