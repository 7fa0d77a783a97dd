/**
 * The README's main job (configs/tiny-cpu.yaml, unchanged) run three times, one after another:
 * unbroken; interrupted by Ctrl-C (SIGINT to the whole process group) during its first GRPO step
 * and continued with `--resume`; and with its Python engine SIGKILLed (what the OOM killer does)
 * in the middle of SFT, which the train worker must get over by itself. Prints per run the wall
 * time, how the fault ended, the updates made after it, and whether the run ended as the unbroken
 * one: the same metrics lines, per-step rewards and advantages, and the final weights' max
 * absolute difference (the bar is 1e-6).
 *
 * --repeat adds a second unbroken run, compared with the first like the faulted ones: whether the
 * config repeats at all. --short runs the fault matrix's config instead (the preset shortened,
 * from its SFT-trained tiny model, testkit/warm-model.ts) with the preset's own rollout workers.
 *
 *   npx tsx scripts/fault-scenarios.ts [--config configs/tiny-cpu.yaml] [--short] [--repeat] [--out .cache/fault-scenarios]
 */
import { mkdirSync, rmSync } from 'node:fs';
import { cpus } from 'node:os';
import { basename, join, resolve } from 'node:path';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { loadRunConfig } from '../packages/trainer-ctl/src/config/index';
import { readMetrics } from '../packages/trainer-ctl/src/run-files/metrics-log';
import {
  compareWithUnbroken,
  presetConfig,
  runWithFaults,
  shortPreset,
  writeConfig,
  type Fault,
} from '../packages/trainer-ctl/test/fault-harness';
import { ensureWarmModel } from '../testkit/warm-model';
import { spawnTrain } from '../packages/trainer-ctl/test/train-fixtures';

const argv = await yargs(hideBin(process.argv))
  .scriptName('fault-scenarios')
  .strict()
  .option('config', { type: 'string', default: 'configs/tiny-cpu.yaml', describe: 'the run config, used as it is' })
  .option('out', { type: 'string', default: '.cache/fault-scenarios', describe: 'where the run directories go' })
  .option('short', {
    type: 'boolean',
    default: false,
    describe: "the fault matrix's shortened config of the preset, with its own rollout workers",
  })
  .option('repeat', { type: 'boolean', default: false, describe: 'a second unbroken run, compared with the first' })
  .parse();

const out = resolve(argv.out);
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
let configFile = resolve(argv.config);
if (argv.short) {
  const preset = basename(configFile, '.yaml');
  const short = shortPreset(preset, await ensureWarmModel(preset), preset, {
    sftConversations: 12,
    sftStepsPerUpdate: 4,
    steps: [2, 2, 2],
  });
  (short.workers as Record<string, unknown>).rollout = (presetConfig(preset, {}).workers as Record<string, unknown>).rollout;
  configFile = writeConfig(join(out, `${preset}-short.yaml`), short);
}
const { config } = loadRunConfig(configFile, { checkPaths: false });
const runId = config.run.name;
console.log(
  `CPU: ${cpus()[0]?.model ?? 'unknown'}, ${cpus().length} cores; ${argv.config}${argv.short ? ' (shortened)' : ''}: rollout workers ${config.workers.rollout.count} x concurrency ${config.workers.rollout.concurrency}, checkpoints every ${config.checkpoints.every_steps}, keep_last ${config.checkpoints.keep_last}, autocast ${config.workers.train.autocast}`,
);

const unbroken = join(out, 'unbroken');
let t0 = Date.now();
const first = await spawnTrain(configFile, unbroken).exited;
if (first.code !== 0) throw new Error(`the unbroken run failed:\n${first.output.slice(-4000)}`);
console.log(`unbroken: ${((Date.now() - t0) / 1000).toFixed(0)} s`);
const metrics = readMetrics(unbroken);
const sft = metrics.filter((m) => m.kind === 'sft').map((m) => m.update as number);
const grpo = metrics.filter((m) => m.kind === 'grpo' && typeof m.update === 'number').map((m) => m.update as number);

const scenarios: { name: string; fault?: Fault }[] = [
  ...(argv.repeat ? [{ name: 'unbroken again' }] : []),
  { name: 'Ctrl-C in the first GRPO step, then --resume', fault: { kind: 'sigint-tree', point: 'grpo-graded', update: grpo[0] } },
  { name: 'engine SIGKILLed in the middle of SFT', fault: { kind: 'engine', point: 'sft', update: sft[Math.floor(sft.length / 2)] } },
];
let failed = 0;
for (const s of scenarios) {
  const runDir = join(out, s.fault?.kind ?? 'unbroken-again');
  t0 = Date.now();
  const run = await runWithFaults(configFile, runDir, runId, s.fault ? [s.fault] : []);
  const secs = ((Date.now() - t0) / 1000).toFixed(0);
  const o = run.outcomes[0];
  const how = o ? `${o.recovery}, ${o.updatesAfter} updates after it` : 'no fault';
  if (run.exit.code !== 0) {
    failed++;
    console.log(`${s.name}: did not finish (exit ${run.exit.code}, ${secs} s)\n${run.output.slice(-2000)}`);
    continue;
  }
  const { weightDiff, problems } = compareWithUnbroken(runDir, unbroken);
  if (problems.length) failed++;
  console.log(
    `${s.name}${o ? ` (update ${o.update})` : ''}: ${how}, ${secs} s; ` +
      `${problems.length ? `DIFFERS: ${problems.join(' | ')}` : 'same metrics lines, rewards and advantages as unbroken'}; max abs weight difference ${weightDiff}`,
  );
}
process.exit(failed ? 1 : 0);
