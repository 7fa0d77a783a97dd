/**
 * trainer-ctl eval: plays policies on a dataset's cases and prints Recall@k and MRR per
 * request, per fault (best request) and per fault by majority vote (RCLAgent Eq. 10), at
 * service and pod level. A policy is a scripted one or baseline (--policy), a model directory
 * on the onnx backend (--model DIR), or a model on an OpenAI-compatible server (--openai URL
 * --model NAME). Several policies play the same cases and share one table; the full results go
 * to a JSON file and, with --episodes, every transcript to a JSONL file. --split picks the
 * cases by the run config's split (training or held-out faults, or the held-out faults on a
 * simulated redeploy, eval/splits.ts).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { CommandModule } from 'yargs';
import {
  evaluate,
  formatComparison,
  formatSummary,
  gapLines,
  policyNames,
  spreadCases,
  type Case,
  type Dataset,
  type EpisodeRecord,
  type EvalResult,
} from '@thinkfl/env';
import { createProgress } from '../progress';
import { enclosingRunConfig, openSolver, playSettingsFromConfig, specLabel, type PlaySettings, type PolicySpec } from '../eval/solvers';
import { CASE_SPLITS, loadSplit, type CaseSplitName } from '../eval/splits';
import { episodeFigures, formatByType, validityByType, type EpisodeFigures, type TypeValidity } from '../sft/figures';

interface EvalArgs {
  dataset: string;
  policy: string[];
  model: string[];
  openai?: string;
  config?: string;
  protocol?: string;
  temperature: number;
  'max-tokens'?: number;
  concurrency: number;
  threads: number;
  limit?: number;
  split: CaseSplitName;
  'redeploy-seed': number;
  out?: string;
  episodes?: string;
}

const stamp = (): string => new Date().toISOString().replace(/[:.]/g, '-');

const positiveInt = (v: number | undefined, flag: string) => {
  if (v !== undefined && (!Number.isInteger(v) || v < 1)) throw new Error(`${flag} must be a positive integer`);
};

function specsOf(args: EvalArgs): PolicySpec[] {
  const specs: PolicySpec[] = args.policy.map((name) => ({ kind: 'scripted', name }));
  for (const m of args.model) {
    specs.push(args.openai ? { kind: 'openai', baseUrl: args.openai, model: m } : { kind: 'onnx', dir: resolve(m) });
  }
  return specs;
}

/** --config, else the run config of the first model directory's run. */
function runConfigOf(args: EvalArgs, specs: PolicySpec[]): string | undefined {
  const firstDir = specs.find((s) => s.kind === 'onnx');
  return args.config ?? (firstDir?.kind === 'onnx' ? enclosingRunConfig(firstDir.dir) : undefined);
}

/** The run config's settings (runConfigOf), else the defaults. */
function playSettings(args: EvalArgs, specs: PolicySpec[]): PlaySettings {
  const file = runConfigOf(args, specs);
  const fromConfig = file ? playSettingsFromConfig(file) : undefined;
  return {
    protocol: args.protocol ?? fromConfig?.protocol,
    episode: fromConfig?.episode ?? {},
    temperature: args.temperature,
    maxTokens: args['max-tokens'] ?? fromConfig?.maxTokens ?? 512,
    renderTools: fromConfig?.renderTools ?? true,
    maxContext: fromConfig?.maxContext,
    concurrency: args.concurrency,
    threads: args.threads,
  };
}

type PolicyResult = {
  policy: string;
  protocol: string | null;
  episodes?: EpisodeFigures & { format_valid_by_type: Record<string, TypeValidity> };
} & EvalResult;

/** One policy on the cases, with a progress line: its results, and one JSONL line per request (transcript, answer, truth, ranks). */
async function evaluatePolicy(
  dataset: Dataset,
  cases: Case[],
  spec: PolicySpec,
  play: PlaySettings,
): Promise<{ result: PolicyResult; lines: string[] }> {
  const solver = await openSolver(dataset, spec, play);
  const episodes = new Map<string, EpisodeRecord>();
  const progress = createProgress({ total: cases.length, label: `eval ${solver.label}` });
  let hits = 0;
  try {
    const result = await evaluate(
      dataset,
      cases,
      async (c) => {
        const r = await solver.solve(c);
        if (r.episode) episodes.set(c.id, r.episode);
        return r;
      },
      {
        concurrency: play.concurrency,
        onProgress: (done, _total, last) => {
          if (last.ranks.service === 0) hits++;
          progress.update(done, `service R@1 ${((100 * hits) / done).toFixed(1)}%`);
        },
      },
    );
    progress.finish();
    const caseOf = new Map(cases.map((c) => [c.id, c]));
    const lines = result.requests.map((r) =>
      JSON.stringify({
        policy: solver.label,
        case_id: r.case_id,
        fault_id: r.fault_id,
        truth: caseOf.get(r.case_id)!.truth,
        answer: r.answer,
        ranks: r.ranks,
        error: r.error,
        episode: episodes.get(r.case_id),
      }),
    );
    // Scripted solvers such as MicroRank play no episodes: no figures for them.
    const played = [...episodes.values()];
    return {
      result: {
        policy: solver.label,
        protocol: solver.protocol,
        ...(played.length > 0 && {
          episodes: { ...episodeFigures(played), format_valid_by_type: validityByType(played, result).by_type },
        }),
        ...result,
      },
      lines,
    };
  } finally {
    await solver.close();
  }
}

/** Writes the results JSON (--out, else under runs/) and the --episodes file; the results file's path. */
function writeResults(
  args: EvalArgs,
  specs: PolicySpec[],
  header: Record<string, unknown>,
  results: PolicyResult[],
  episodeLines: string[],
): string {
  const out = resolve(
    args.out ?? `runs/eval-${specs.length === 1 ? specLabel(specs[0]).replace(/[^A-Za-z0-9._-]+/g, '_') : 'compare'}-${stamp()}.json`,
  );
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(
    out,
    `${JSON.stringify(results.length === 1 ? { ...header, ...results[0] } : { ...header, policies: results }, null, 1)}\n`,
  );
  if (args.episodes) {
    const file = resolve(args.episodes);
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(file, episodeLines.map((l) => `${l}\n`).join(''));
  }
  return out;
}

/** The table on stdout: one policy's summary, or several side by side, and the requests that failed. */
function printResults(args: EvalArgs, dataset: Dataset, cases: Case[], results: PolicyResult[], out: string): void {
  const faults = new Set(cases.map((c) => c.fault_id)).size;
  const names = results.map((r) => `${r.policy}${r.protocol ? ` (protocol ${r.protocol})` : ''}`).join(', ');
  console.log(
    `dataset ${dataset.meta.name}${args.split === 'all' ? '' : ` (split ${args.split})`}: ${results.length === 1 ? 'policy' : 'policies'} ${names}, ${cases.length} requests of ${faults} faults`,
  );
  console.log(
    results.length === 1
      ? formatSummary(results[0], results[0].levels)
      : formatComparison(
          results.map((r) => ({ policy: r.policy, summary: r })),
          results[0].levels,
        ),
  );
  for (const r of results) {
    if (r.episodes)
      console.log(
        `${r.policy}: format validity ${r.episodes.format_valid.toFixed(2)}, answered ${r.episodes.answered.toFixed(2)}, ` +
          `tool calls ${r.episodes.tool_calls.toFixed(1)} an episode; by fault type: ${formatByType(r.episodes.format_valid_by_type)}`,
      );
    const errors = r.requests.filter((q) => q.error).length;
    if (errors) console.log(`${r.policy}: ${errors} request(s) failed (counted as misses; see "error" in the JSON)`);
  }
  if (args.episodes) console.log(`episodes: ${resolve(args.episodes)}`);
  console.log(`results: ${out}`);
}

export const command: CommandModule<object, EvalArgs> = {
  command: 'eval',
  describe: 'evaluate policies (scripted, a model directory, or a served model): Recall@1/2/3/5/10 and MRR per request and per fault',
  builder: (y) =>
    y
      .option('dataset', { type: 'string', demandOption: true, describe: 'dataset directory (written by trainer-ctl import)' })
      .option('policy', {
        type: 'string',
        array: true,
        default: [] as string[],
        choices: policyNames(),
        describe: 'scripted policy or baseline to evaluate (repeatable; listed before --model policies)',
      })
      .option('model', {
        type: 'string',
        array: true,
        default: [] as string[],
        describe:
          'model or checkpoint directory on the onnx backend (a checkpoint is exported first; repeatable); with --openai, a model name on that server',
      })
      .option('openai', {
        type: 'string',
        describe: 'base URL of an OpenAI-compatible server (e.g. http://127.0.0.1:8000/v1); --model names its models',
      })
      .option('config', {
        type: 'string',
        describe: "run config whose episode and generation settings models play with (default: the model directory's run)",
      })
      .option('protocol', {
        type: 'string',
        describe: "episode protocol of agent policies (default: the run config's, else a scripted policy's own, else rot)",
      })
      .option('temperature', { type: 'number', default: 0, describe: 'sampling temperature of model turns; 0 is greedy' })
      .option('max-tokens', {
        type: 'number',
        describe: "most tokens per model turn (default: the run config's generation.sampling.max_tokens, else 512)",
      })
      .option('concurrency', { type: 'number', default: 1, describe: 'episodes played at once (requests in flight for --openai)' })
      .option('threads', {
        type: 'number',
        default: 0,
        describe: 'onnxruntime threads per operator for --model directories; 0 lets it choose',
      })
      .option('limit', { type: 'number', describe: 'evaluate at most this many cases, spread over the faults' })
      .option('split', {
        type: 'string',
        choices: CASE_SPLITS,
        default: 'all' as CaseSplitName,
        describe:
          "cases by the run config's dataset.split: all, train (training faults), eval (held-out faults), redeploy (held-out faults with every pod re-hashed, as after a redeploy)",
      })
      .option('redeploy-seed', { type: 'number', default: 1, describe: 'seed of the new pod names of --split redeploy' })
      .option('out', { type: 'string', describe: 'results JSON (default runs/eval-<policy>-<timestamp>.json)' })
      .option('episodes', { type: 'string', describe: 'write every episode (transcript, answer, truth, ranks) to this JSONL file' })
      .check((a) => {
        positiveInt(a.limit, '--limit');
        positiveInt(a.concurrency, '--concurrency');
        positiveInt(a['max-tokens'], '--max-tokens');
        if (a.openai !== undefined && !a.model.length) throw new Error('--openai needs --model NAME: the model to ask the server for');
        if (!a.policy.length && !a.model.length)
          throw new Error('name a policy to evaluate: --policy NAME, --model DIR or --openai URL --model NAME');
        return true;
      }),
  handler: async (args) => {
    const dir = resolve(args.dataset);
    const specs = specsOf(args);
    const { dataset, cases: split } = await loadSplit(dir, args.split, runConfigOf(args, specs), args['redeploy-seed']);
    // Figures on a dataset imported around gaps are read with them in view.
    for (const line of gapLines(dataset.meta.gaps)) process.stderr.write(`warning: dataset ${dataset.meta.name}: ${line}\n`);
    const cases = spreadCases(split, args.limit);
    if (!cases.length) throw new Error(`dataset ${dir} has no cases to evaluate${args.split === 'all' ? '' : ` in split ${args.split}`}`);
    const play = playSettings(args, specs);

    const results: PolicyResult[] = [];
    const episodeLines: string[] = [];
    for (const spec of specs) {
      const { result, lines } = await evaluatePolicy(dataset, cases, spec, play);
      results.push(result);
      episodeLines.push(...lines);
    }
    const header = {
      dataset: { dir, name: dataset.meta.name, gaps: gapLines(dataset.meta.gaps) },
      split: args.split,
      // The new pod names are the seed's: the figures are reproducible only with it.
      ...(args.split === 'redeploy' ? { redeploy_seed: args['redeploy-seed'] } : {}),
      created_at: new Date().toISOString(),
      cases: cases.length,
    };
    printResults(args, dataset, cases, results, writeResults(args, specs, header, results, episodeLines));
  },
};
