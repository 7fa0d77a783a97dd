/**
 * trainer-ctl probe: the headroom probe (eval/probe.ts). For a model directory (a published
 * policy or a checkpoint) and a split of its run's cases, plays the greedy walk to the answer
 * turn (or walk turn --at k), samples k continuations from that prefix at a temperature, and prints per case, per fault and
 * in total the greedy reciprocal rank, the best of k and the share of samples that rank the root
 * cause's service first, and the faults where some sample does and greedy does not.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { CommandModule } from 'yargs';
import { spreadCases } from '@thinkfl/env';
import { loadRunConfig } from '../config/index';
import { createProgress } from '../progress';
import { formatProbe, probeCase, summarizeProbe, type CaseProbe } from '../eval/probe';
import { enclosingRunConfig, openOnnxModel, playSettingsFromConfig } from '../eval/solvers';
import { CASE_SPLITS, loadSplit, type CaseSplitName } from '../eval/splits';
import { THREADS_OPTION } from '../cli-options';

interface ProbeArgs {
  model: string;
  config?: string;
  dataset?: string;
  split: CaseSplitName;
  'redeploy-seed': number;
  k: number;
  temperature: number;
  at: string;
  seed: number;
  limit?: number;
  threads: number;
  out?: string;
}

export const command: CommandModule<object, ProbeArgs> = {
  command: 'probe',
  describe:
    'headroom probe: greedy walk to the answer turn, then k sampled answers from that prefix; greedy RR, best of k and share ranked first, per case and per fault',
  builder: (y) =>
    y
      .option('model', {
        type: 'string',
        demandOption: true,
        describe: 'model or checkpoint directory on the onnx backend (a policy a run published, e.g. runs/NAME/policies/v18)',
      })
      .option('config', {
        type: 'string',
        describe: "run config: episode and generation settings, the dataset and its split (default: the model directory's run)",
      })
      .option('dataset', { type: 'string', describe: "dataset directory (default: the run config's dataset.path)" })
      .option('split', {
        type: 'string',
        choices: CASE_SPLITS,
        default: 'eval' as CaseSplitName,
        describe:
          "cases by the run's dataset.split: eval (held-out faults), train (training faults), redeploy (held-out faults with every pod re-hashed), all",
      })
      .option('redeploy-seed', { type: 'number', default: 1, describe: 'seed of the new pod names of --split redeploy' })
      .option('k', { type: 'number', default: 8, describe: 'answers sampled from each greedy prefix' })
      .option('temperature', { type: 'number', default: 1, describe: 'sampling temperature from the branch turn on' })
      .option('at', {
        type: 'string',
        default: 'answer',
        describe:
          "branch turn, as grpo.groups kind branch's at: answer (the greedy episode's last turn) or k, after its first k turns (0: whole episodes)",
      })
      .option('seed', { type: 'number', default: 0, describe: 'base seed of the samples' })
      .option('limit', { type: 'number', describe: 'probe at most this many cases, spread over the faults' })
      .option('threads', THREADS_OPTION)
      .option('out', { type: 'string', describe: 'write every case, fault and the totals to this JSON file' })
      .check((a) => {
        if (!Number.isInteger(a.k) || a.k < 1) throw new Error('--k must be a positive integer');
        if (!(a.temperature >= 0)) throw new Error('--temperature must be >= 0');
        if (a.at !== 'answer' && !/^\d+$/.test(a.at)) throw new Error(`--at must be answer or a turn count >= 0, got ${a.at}`);
        if (!Number.isInteger(a.seed) || a.seed < 0) throw new Error('--seed must be a non-negative integer');
        if (a.limit !== undefined && (!Number.isInteger(a.limit) || a.limit < 1)) throw new Error('--limit must be a positive integer');
        return true;
      }),
  handler: async (args) => {
    const modelDir = resolve(args.model);
    const configFile = args.config ? resolve(args.config) : enclosingRunConfig(modelDir);
    if (!configFile) throw new Error(`--model ${modelDir} is not inside a run directory: name its run config with --config`);
    const play = { ...playSettingsFromConfig(configFile), temperature: 0, concurrency: 1, threads: args.threads };
    const datasetDir = resolve(args.dataset ?? loadRunConfig(configFile, { checkPaths: false }).config.dataset.path);
    const { dataset, cases: all } = await loadSplit(datasetDir, args.split, configFile, args['redeploy-seed']);
    const cases = spreadCases(all, args.limit);
    if (!cases.length) throw new Error(`split ${args.split} of ${datasetDir} has no cases`);
    const settings = {
      k: args.k,
      temperature: args.temperature,
      at: args.at === 'answer' ? ('answer' as const) : Number(args.at),
      seed: args.seed,
    };
    const model = await openOnnxModel(modelDir, args.threads);
    const probes: CaseProbe[] = [];
    const progress = createProgress({ total: cases.length, label: `probe ${args.split}` });
    try {
      for (const [i, c] of cases.entries()) {
        probes.push(await probeCase(dataset, c, model, play, settings, i));
        progress.update(i + 1, `best-of-${args.k} hits ${probes.filter((p) => p.best_rr === 1).length}`);
      }
      progress.finish();
    } finally {
      await model.close();
    }
    const summary = summarizeProbe(probes, settings);
    console.log(
      `probe ${modelDir} on ${dataset.meta.name}, split ${args.split}: ${cases.length} cases of ${summary.per_fault.faults} faults`,
    );
    console.log(formatProbe(probes, summary));
    if (args.out) {
      const out = resolve(args.out);
      mkdirSync(dirname(out), { recursive: true });
      writeFileSync(
        out,
        `${JSON.stringify({ model: modelDir, config: configFile, dataset: datasetDir, split: args.split, ...(args.split === 'redeploy' ? { redeploy_seed: args['redeploy-seed'] } : {}), ...settings, summary, cases: probes }, null, 1)}\n`,
      );
      console.log(`results: ${out}`);
    }
  },
};
