/**
 * Issue "A policy that runs and trains", acceptance 4: SFT of the tiny model on scripted-expert
 * conversations from the Nezha 2023-01-29 training faults, then `rot` episodes with the ONNX
 * export on held-out faults. Prints the SFT time, the data size, the share of valid tool-call
 * turns, the share of episodes ending with a valid print_results, and Recall@1 per fault.
 *
 *   npx tsx scripts/sft-tiny.ts [--out DIR] [--epochs N] [--seeds 0,1,2] ...
 */
import { execFile } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { loadDataset, runEpisode, spreadCases } from '@thinkfl/env';
import { loadChatModel, ModelPolicy, openOnnxBackend } from '../packages/rollout/src/index';
import { TrainEngine } from '../packages/trainer-ctl/src/engine/index';
import {
  formatFigures,
  policyFigures,
  sampleTokens,
  sftSample,
  splitCases,
  type PlayedEpisode,
} from '../packages/trainer-ctl/src/sft/index';
import { sft } from '../packages/trainer-ctl/src/algo/sft/schedule';
import { teacherEpisodes } from '@thinkfl/env';
import { ensureNezhaDataset, REPO_ROOT } from '../testkit/nezha';

const argv = await yargs(hideBin(process.argv))
  .scriptName('sft-tiny')
  .strict()
  .option('out', { type: 'string', describe: 'model dir to create and train (default: a temp dir)' })
  .option('model-seed', { type: 'number', default: 0, describe: 'weight init seed' })
  .option('hidden-size', { type: 'number', default: 128 })
  .option('layers', { type: 'number', default: 3 })
  .option('heads', { type: 'number', default: 2 })
  .option('head-dim', { type: 'number', default: 64 })
  .option('intermediate-size', { type: 'number', default: 256 })
  .option('eval-fraction', { type: 'number', default: 0.3, describe: 'share of faults held out (dataset.split by fault)' })
  .option('split-seed', { type: 'number', default: 0 })
  .option('d-max', {
    type: 'number',
    default: 5,
    describe: 'tool turns of a rot episode (D_max) in the teacher data and the held-out play',
  })
  .option('turns-left-note', {
    type: 'boolean',
    default: true,
    describe: 'each observation says how many tool turns are left (run config episode.turns_left_note)',
  })
  .option('variants', { type: 'number', default: 10, describe: 'teacher conversations played per training case' })
  .option('detour-rate', { type: 'number', default: 0.5, describe: 'chance an exploration turn is a detour (not trained on)' })
  .option('reasoning', {
    type: 'boolean',
    default: false,
    describe: "keep the expert's free text (reasoning before each call, reasons in the answer)",
  })
  .option('max-answers', { type: 'number', default: 3, describe: "most root causes in the expert's answers" })
  .option('epochs', { type: 'number', default: 5 })
  .option('batch', { type: 'number', default: 1 })
  .option('lr', { type: 'number', default: 5e-3 })
  .option('warmup-steps', {
    type: 'number',
    default: 10,
    describe: 'SFT steps of linear learning-rate warm-up (stages.priming.sft.warmup_steps)',
  })
  .option('min-lr-ratio', {
    type: 'number',
    default: 0.1,
    describe: 'floor of the cosine decay, a fraction of lr (stages.priming.sft.min_lr_ratio)',
  })
  .option('time-budget', { type: 'number', describe: 'stop SFT after this many seconds' })
  .option('autocast', {
    type: 'string',
    choices: ['auto', 'float32', 'bfloat16'] as const,
    default: 'auto' as const,
    describe: 'compute precision (workers.train.autocast)',
  })
  .option('eval-cases', { type: 'number', default: 16, describe: 'held-out cases played per seed, spread over the held-out faults' })
  .option('seeds', { type: 'string', default: '0,1,2', describe: 'sampling seeds of the held-out play' })
  .option('render-tools', { type: 'boolean', default: false, describe: 'render the tools into the prompt through the chat template' })
  .option('temperature', { type: 'number', default: 0.3 })
  .option('max-tokens', { type: 'number', default: 512, describe: 'most tokens of one assistant turn' })
  .parseAsync();

const episode = { d_max: argv.dMax, turns_left_note: argv.turnsLeftNote, tool_settings: { span_aliases: true } };
const dir = argv.out ?? join(mkdtempSync(join(tmpdir(), 'sft-tiny-')), 'model');
const datasetDir = await ensureNezhaDataset();
const dataset = await loadDataset(datasetDir);

const modelArgs = [
  '--dataset',
  datasetDir,
  '--out',
  dir,
  '--seed',
  String(argv.modelSeed),
  '--hidden-size',
  String(argv.hiddenSize),
  '--layers',
  String(argv.layers),
  '--heads',
  String(argv.heads),
  '--head-dim',
  String(argv.headDim),
  '--intermediate-size',
  String(argv.intermediateSize),
];
const created = await promisify(execFile)(
  process.execPath,
  ['--import', 'tsx', join(REPO_ROOT, 'scripts', 'create-tiny-model.ts'), ...modelArgs],
  { cwd: REPO_ROOT },
);
console.log(created.stdout.trim());

const split = splitCases(dataset.cases, { by: 'fault', eval_fraction: argv.evalFraction }, argv.splitSeed);
const faults = (cs: typeof split.train) => new Set(cs.map((c) => c.fault_id)).size;
console.log(
  `split by fault: ${split.train.length} train cases (${faults(split.train)} faults), ${split.eval.length} held-out cases (${faults(split.eval)} faults)`,
);

const chat = loadChatModel(dir);
const teacher = await teacherEpisodes({
  dataset,
  cases: split.train,
  episode,
  variants: argv.variants,
  reasoning: argv.reasoning,
  expert: { max_answers: argv.maxAnswers },
  detours: { rate: argv.detourRate },
});
const samples = teacher.episodes.map((e) => sftSample(e, chat, { renderTools: argv.renderTools }));
const size = sampleTokens(samples);
const detours = teacher.episodes.reduce((n, e) => n + e.untrainedTurns.length, 0);
console.log(
  `teacher: ${teacher.played} expert conversations played, ${teacher.correct} correct kept (${new Set(teacher.episodes.map((e) => e.case.id)).size} cases); ` +
    `${size.tokens} tokens, ${size.trained} trained, ${detours} detour turns not trained on`,
);

const engine = new TrainEngine({ onStderr: (t) => process.stderr.write(t) });
let report: Awaited<ReturnType<typeof sft>>;
try {
  const loaded = await engine.request('load', { model_dir: dir, seed: 0, autocast: argv.autocast });
  console.log(
    `SFT: ${loaded.parameters} parameters, ${samples.length} conversations x ${argv.epochs} epochs, batch ${argv.batch}, lr ${argv.lr}, compute ${loaded.precision}, ${loaded.threads} threads`,
  );
  let last = Date.now();
  report = await sft(
    engine,
    samples,
    { epochs: argv.epochs, batch_size: argv.batch, warmup_steps: argv.warmupSteps, min_lr_ratio: argv.minLrRatio },
    { lr: argv.lr, ...(argv.timeBudget !== undefined && { timeBudgetS: argv.timeBudget }) },
    (step, total, loss) => {
      if (Date.now() - last > 15_000 || step === total) {
        last = Date.now();
        process.stderr.write(`  step ${step}/${total} loss ${loss.toFixed(3)}\n`);
      }
    },
  );
  await engine.request('save', { dir });
  await engine.request('export', { dir, format: 'onnx' });
} finally {
  await engine.shutdown();
}
console.log(
  `SFT wall time ${(report.wallMs / 1000).toFixed(1)} s: ${report.steps} steps, ${report.epochs} epochs, loss per epoch ${report.epochLoss.map((l) => l.toFixed(3)).join(' ')}, ${report.tokens} trained tokens seen`,
);

const backend = await openOnnxBackend({ model_dir: dir });
const cases = spreadCases(split.eval, argv.evalCases);
const all: PlayedEpisode[] = [];
try {
  for (const seed of argv.seeds.split(',').map(Number)) {
    const started = Date.now();
    const played: PlayedEpisode[] = [];
    for (const [i, c] of cases.entries()) {
      const policy = new ModelPolicy({
        backend,
        chat,
        settings: { renderTools: argv.renderTools, temperature: argv.temperature, maxTokens: argv.maxTokens, seed: seed * 100_000 + i },
      });
      played.push({ case: c, record: await runEpisode({ dataset, case: c, policy, settings: episode }) });
    }
    all.push(...played);
    console.log(
      `\nheld-out play, seed ${seed}, temperature ${argv.temperature}: ${cases.length} cases of ${faults(cases)} unseen faults (${((Date.now() - started) / 1000).toFixed(0)} s)`,
    );
    console.log(formatFigures(policyFigures(dataset, played)));
  }
} finally {
  await backend.close();
}
console.log(`\nall seeds:\n${formatFigures(policyFigures(dataset, all))}`);
console.log(`model: ${dir}`);
