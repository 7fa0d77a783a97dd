/**
 * Runs a run config (default the README's main job, configs/tiny-cpu.yaml) for several seeds,
 * one after another, each in its own run directory, and prints per seed its wall time and, after
 * SFT and after each stage, the held-out format validity, per-fault service MRR (best request
 * and majority vote) and per-request service MRR; then MicroRank and the scripted expert on the
 * same held-out cases of each seed. The seed is run.seed; everything else is the config's,
 * except what --set overrides (a YAML path and a value, e.g. --set workers.train.autocast=float32
 * for the compute a CPU without bf16 gets). With --init-seeds the seed also makes the initial
 * model (model.create_tiny.seed, in its own model.dir): one create_tiny seed gives one initial
 * model, and the SFT checkpoint's held-out figures differ more between initial models than
 * between run seeds (docs/experiments.md, "Headroom of the SFT checkpoint", experiments 2-6).
 *
 *   npx tsx scripts/seeds.ts [--config FILE] [--seeds 0,1,2] [--init-seeds] [--out DIR] [--set PATH=VALUE ...]
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { parse, parseDocument } from 'yaml';
import { evaluate, loadDataset, solverFor } from '@thinkfl/env';
import { loadRunConfig } from '../packages/trainer-ctl/src/config/index';
import { runCases } from '../packages/trainer-ctl/src/controller/cases';
import { REPO_ROOT } from '../testkit/nezha';

const argv = await yargs(hideBin(process.argv))
  .scriptName('seeds')
  .strict()
  .option('config', { type: 'string', default: 'configs/tiny-cpu.yaml', describe: 'run config to repeat' })
  .option('seeds', { type: 'string', default: '0,1,2', describe: 'comma-separated run.seed values' })
  .option('init-seeds', {
    type: 'boolean',
    default: false,
    describe: 'also set model.create_tiny.seed to the seed, each initial model in its own model.dir',
  })
  .option('out', { type: 'string', default: '.cache/seeds', describe: 'where the per-seed configs are written' })
  .option('set', {
    type: 'string',
    array: true,
    default: [],
    describe: 'override PATH=VALUE (dotted YAML path; the value is parsed as YAML)',
  })
  .parse();

const overrides = argv.set.map((s) => {
  const eq = s.indexOf('=');
  if (eq <= 0) throw new Error(`--set ${s}: need PATH=VALUE, e.g. workers.train.autocast=float32`);
  return { path: s.slice(0, eq).split('.'), value: parse(s.slice(eq + 1)) as unknown };
});

const configPath = resolve(argv.config);
const outDir = resolve(argv.out);
mkdirSync(outDir, { recursive: true });
const seeds = argv.seeds.split(',').map((s) => Number(s.trim()));
if (seeds.some((s) => !Number.isInteger(s))) throw new Error(`--seeds: need comma-separated integers, got ${argv.seeds}`);

type Mrr = { service?: { mrr: number } };
interface EvalFile {
  format_valid: number;
  summary: { per_request: Mrr; per_fault: Mrr; per_fault_vote?: Mrr };
}
const STAGES = ['sft', 'priming', 'exploration', 'refinement'];
const BASELINES = ['microrank', 'expert'];
const mrr = (m: Mrr | undefined): string => (m?.service ? m.service.mrr.toFixed(3) : '-');
const rows: string[] = [];
const baselineRows: string[] = [];
console.log(`CPU: ${cpus()[0]?.model ?? 'unknown'}, ${cpus().length} cores`);
for (const seed of seeds) {
  const doc = parseDocument(readFileSync(configPath, 'utf8'));
  const name = `${doc.getIn(['run', 'name'])}${overrides.length ? '-set' : ''}${argv.initSeeds ? '-init' : ''}-seed${seed}`;
  doc.setIn(['run', 'name'], name);
  doc.setIn(['run', 'seed'], seed);
  if (argv.initSeeds) {
    if (!doc.hasIn(['model', 'create_tiny'])) throw new Error(`--init-seeds: ${argv.config} has no model.create_tiny to seed`);
    doc.setIn(['model', 'create_tiny', 'seed'], seed);
    doc.setIn(['model', 'dir'], `${String(doc.getIn(['model', 'dir']))}-init${seed}`);
  }
  for (const o of overrides) doc.setIn(o.path, o.value);
  // The copy lives elsewhere: keep its relative paths pointing where the original's do.
  const base = resolve(dirname(configPath), String(doc.getIn(['run', 'base_dir']) ?? '.'));
  doc.setIn(['run', 'base_dir'], relative(outDir, base) || '.');
  const file = join(outDir, `${name}.yaml`);
  writeFileSync(file, doc.toString());
  const t0 = performance.now();
  const run = spawnSync(process.execPath, [join(REPO_ROOT, 'packages/trainer-ctl/bin/trainer-ctl.mjs'), 'train', file], {
    stdio: 'inherit',
  });
  const wall = (performance.now() - t0) / 1000;
  const runDir = join(base, String(doc.getIn(['run', 'output_dir']) ?? 'runs'), name);
  const cells = STAGES.map((stage) => {
    const f = join(runDir, `eval-${stage}.json`);
    if (!existsSync(f)) return '-';
    const e = JSON.parse(readFileSync(f, 'utf8')) as EvalFile;
    return `${e.format_valid.toFixed(2)} / ${mrr(e.summary.per_fault)} / ${mrr(e.summary.per_fault_vote)} / ${mrr(e.summary.per_request)}`;
  });
  rows.push(`| ${seed} | ${run.status === 0 ? 'ok' : `exit ${run.status}`} | ${wall.toFixed(0)} | ${cells.join(' | ')} |`);
  // The baselines on the cases this seed's run evaluated (the run imported the dataset if it was missing).
  const { config } = loadRunConfig(file);
  const dataset = await loadDataset(config.dataset.path);
  const held = runCases(dataset, config).eval;
  const scores = [];
  for (const name of BASELINES) {
    const r = await evaluate(dataset, held, solverFor(dataset, name));
    scores.push(`${mrr(r.per_fault)} / ${mrr(r.per_fault_vote)} / ${mrr(r.per_request)}`);
  }
  baselineRows.push(`| ${seed} | ${held.length} | ${new Set(held.map((c) => c.fault_id)).size} | ${scores.join(' | ')} |`);
}
console.log('\nPer stage: held-out format validity / per-fault service MRR (best request) / (majority vote) / per-request service MRR\n');
console.log(`| seed | exit | wall s | ${STAGES.join(' | ')} |`);
console.log(`| --- | --- | --- | ${STAGES.map(() => '---').join(' | ')} |`);
for (const r of rows) console.log(r);
console.log('\nBaselines on the same held-out cases: per-fault service MRR (best request) / (majority vote) / per-request service MRR\n');
console.log(`| seed | cases | faults | ${BASELINES.join(' | ')} |`);
console.log(`| --- | --- | --- | ${BASELINES.map(() => '---').join(' | ')} |`);
for (const r of baselineRows) console.log(r);
