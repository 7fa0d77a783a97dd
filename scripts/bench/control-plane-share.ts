/**
 * Benchmark: the control plane's share of a tiny-model GRPO step's wall time. Runs real steps
 * of the controller (configs/tiny-cpu.yaml by default: embedded Redis, one rollout and one train
 * worker as child processes, the tiny model on the real Nezha cases) and splits each step into
 *   generation   time at least one episode was being played (union of the episodes' intervals),
 *   queueing     enqueueing, the rest of the wait for complete groups, and the train job's
 *                round trip beyond the worker's own update time,
 *   grading      graders on every group plus advantages,
 *   update       the train worker's update (engine step, policy export),
 * then prints the control plane's share (queueing + grading) of the step, and what the
 * queueing is made of: enqueueing, the wait for the first episode (the rollout worker loads
 * the new policy), gaps between and after episodes, and the train job's round trip. Every step makes an
 * update (skip_equal_groups off, no refills) so the update is measured; the first step, which
 * also loads the policy, is reported separately from the median of the rest.
 *
 *   npx tsx scripts/bench/control-plane-share.ts [--config FILE] [--model DIR] [--steps N]
 *
 * --model: start from this model directory instead of the config's (e.g. runs/tiny-cpu/checkpoints/update-N
 * after `trainer-ctl train configs/tiny-cpu.yaml`, so the episodes are the trained policy's).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parse, stringify } from 'yaml';
import { loadDataset } from '@thinkfl/env';
import { loadRunConfig } from '../../packages/trainer-ctl/src/config/index';
import {
  groupIdOf,
  prepareInputs,
  RedisTransport,
  runCases,
  runGrpoStep,
  startWorkerProcess,
  stopWorkerProcesses,
  type StepRecord,
} from '../../packages/trainer-ctl/src/controller/index';
import { connectRedis, GroupStore, type Trajectory } from '../../packages/trainer-ctl/src/queue/index';
import { startEmbeddedRedis } from '../../packages/trainer-ctl/src/redis/embedded';

const { values } = parseArgs({
  options: {
    config: { type: 'string', default: 'configs/tiny-cpu.yaml' },
    model: { type: 'string' },
    steps: { type: 'string', default: '4' },
  },
});
const steps = Math.max(2, Number(values.steps));
const runDir = mkdtempSync(join(tmpdir(), 'bench-control-plane-'));

/**
 * The config the bench runs: the given one with --model (e.g. a trained run's checkpoint, whose
 * episodes call tools) as the model, written next to the run so that the workers read it too.
 */
function benchConfig(): string {
  const src = resolve(values.config);
  const doc = parse(readFileSync(src, 'utf8')) as { run: { base_dir?: string }; model: { dir?: string; create_tiny?: unknown } };
  doc.run.base_dir = resolve(dirname(src), doc.run.base_dir ?? '.');
  if (values.model) {
    doc.model.dir = resolve(values.model);
    delete doc.model.create_tiny;
  }
  const file = join(runDir, 'run.yaml');
  writeFileSync(file, stringify(doc));
  return file;
}
const configFile = benchConfig();

/** Length of the union of [start, end) intervals, ms. */
function unionMs(intervals: [number, number][]): number {
  let total = 0;
  let end = -Infinity;
  for (const [a, b] of [...intervals].sort((x, y) => x[0] - y[0])) {
    if (b <= end) continue;
    total += b - Math.max(a, end);
    end = b;
  }
  return total;
}

interface Split {
  stepMs: number;
  generation: number;
  queueing: number;
  grading: number;
  update: number;
  /** Parts of queueing: enqueueing, until the first episode starts, rollout gaps after that, the train job's round trip. */
  enqueue: number;
  firstEpisode: number;
  gaps: number;
  trainTrip: number;
  /** The policy export, counted in update. */
  exportMs: number;
}

/** `startedMs`: when the step began (Date.now()), to place the first episode's start. */
function split(r: StepRecord, trajectories: Trajectory[], startedMs: number): Split {
  const intervals = trajectories.map((t): [number, number] => [
    t.episode.timing.started_at,
    t.episode.timing.started_at + t.episode.timing.wall_ms,
  ]);
  const generation = unionMs(intervals);
  // The engine step and the policy export (the train worker's metrics).
  const update = Number(r.train.train_ms ?? 0) + Number(r.train.export_ms ?? 0);
  const t = r.timing;
  const rolloutGap = Math.max(0, t.rollout_ms - generation);
  const firstEpisode = Math.min(rolloutGap, Math.max(0, Math.min(...intervals.map((i) => i[0])) - startedMs - t.enqueue_ms));
  const trainTrip = Math.max(0, t.update_ms - update);
  return {
    stepMs: t.step_ms,
    generation,
    queueing: t.enqueue_ms + rolloutGap + trainTrip,
    grading: t.grade_ms,
    update,
    enqueue: t.enqueue_ms,
    firstEpisode,
    gaps: rolloutGap - firstEpisode,
    trainTrip,
    exportMs: Number(r.train.export_ms ?? 0),
  };
}

await prepareInputs(loadRunConfig(configFile, { checkPaths: false }).config, (l) => process.stderr.write(`${l}\n`));
const { config } = loadRunConfig(configFile);
config.grpo.advantage.skip_equal_groups = false;
config.grpo.max_refill_groups = 0;
const redis = await startEmbeddedRedis({ runDir });
const args = ['--config', configFile, '--redis', redis.url, '--run-dir', runDir];
// A fresh Redis and run directory: the workers join the config's run name without meeting a real run.
const workers = [startWorkerProcess(runDir, 'train', 'train', args), startWorkerProcess(runDir, 'rollout-0', 'rollout', args)];
const transport = new RedisTransport(redis.url, config.run.name, { prefix: config.queue.prefix });
const storeConn = connectRedis(redis.url);
const store = new GroupStore(storeConn, config.run.name);
const splits: Split[] = [];
try {
  const dataset = await loadDataset(config.dataset.path);
  const ctx = { config, dataset, runId: config.run.name, train: runCases(dataset, config).train, transport };
  for (let step = 0; step < steps; step++) {
    const startedMs = Date.now();
    const { record } = await runGrpoStep(ctx, { stage: 'priming', step, update: step, policyVersion: step, checkpoint: false });
    const groups = await Promise.all(Array.from({ length: record.groups }, (_, slot) => store.read(groupIdOf('priming', step, slot))));
    splits.push(split(record, groups.flat(), startedMs));
    process.stderr.write(`step ${step}: ${(record.timing.step_ms / 1000).toFixed(1)} s, ${record.samples} episodes\n`);
  }
} finally {
  await transport.close();
  await store.close();
  await storeConn.quit();
  await stopWorkerProcesses(workers);
  await redis.stop();
  rmSync(runDir, { recursive: true, force: true });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const show = (label: string, s: Split) => {
  const pct = (x: number) => `${((100 * x) / s.stepMs).toFixed(1)}%`.padStart(7);
  console.log(
    `${label.padEnd(22)} step ${(s.stepMs / 1000).toFixed(2).padStart(7)} s | generation ${pct(s.generation)} | queueing ${pct(s.queueing)} | ` +
      `grading+advantages ${pct(s.grading)} | update ${pct(s.update)} | control plane ${pct(s.queueing + s.grading)}`,
  );
  const ms = (x: number) => `${x.toFixed(0)} ms`;
  console.log(
    `${''.padEnd(22)} queueing: enqueue ${ms(s.enqueue)}, until the first episode ${ms(s.firstEpisode)}, gaps between and after episodes ${ms(s.gaps)}, train job round trip ${ms(s.trainTrip)}; update includes the policy export ${ms(s.exportMs)}`,
  );
};
const rest = splits.slice(1);
const keys = Object.keys(splits[0]) as (keyof Split)[];
const med = Object.fromEntries(keys.map((k) => [k, median(rest.map((s) => s[k]))])) as unknown as Split;
console.log(`${config.grpo.cases_per_step} cases x ${config.grpo.group_size} samples per step, ${steps} steps, model ${config.model.dir}`);
show('first step (warm-up)', splits[0]);
show(`median of ${rest.length} later`, med);
