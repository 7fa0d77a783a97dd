/**
 * trainer-ctl eval: plays a policy without a model (scripted expert or a classic baseline)
 * on a dataset's cases and prints Recall@k and MRR per request and per fault, at service and
 * pod level; the full results go to a JSON file.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import type { CommandModule } from 'yargs';
import { evaluate, formatSummary, getPolicy, loadDataset, policyNames, solverFor, spreadCases } from '@thinkfl/env';
import { createProgress } from '../progress';

interface EvalArgs {
  dataset: string;
  policy: string;
  protocol?: string;
  limit?: number;
  out?: string;
}

const stamp = (): string => new Date().toISOString().replace(/[:.]/g, '-');

export const command: CommandModule<object, EvalArgs> = {
  command: 'eval',
  describe: 'evaluate a scripted policy or baseline: Recall@1/2/3/5/10 and MRR per request and per fault',
  builder: (y) =>
    y
      .option('dataset', { type: 'string', demandOption: true, describe: 'dataset directory (written by trainer-ctl import)' })
      .option('policy', { type: 'string', demandOption: true, choices: policyNames(), describe: 'policy to evaluate' })
      .option('protocol', { type: 'string', describe: "episode protocol for agent policies (default: the policy's own, else rot)" })
      .option('limit', { type: 'number', describe: 'evaluate at most this many cases, spread over the faults' })
      .option('out', { type: 'string', describe: 'results JSON (default runs/eval-<policy>-<timestamp>.json)' })
      .check((a) => {
        if (a.limit !== undefined && (!Number.isInteger(a.limit) || a.limit < 1)) throw new Error('--limit must be a positive integer');
        return true;
      }),
  handler: async (args) => {
    const dir = resolve(args.dataset);
    const dataset = await loadDataset(dir);
    const cases = spreadCases(dataset.cases, args.limit);
    if (!cases.length) throw new Error(`dataset ${dir} has no cases to evaluate`);
    const solve = solverFor(dataset, args.policy, { protocol: args.protocol });
    const progress = createProgress({ total: cases.length, label: `eval ${args.policy}` });
    let hits = 0;
    const result = await evaluate(dataset, cases, solve, {
      onProgress: (done, _total, last) => {
        if (last.ranks.service === 0) hits++;
        progress.update(done, `service R@1 ${((100 * hits) / done).toFixed(1)}%`);
      },
    });
    progress.finish();

    const out = resolve(args.out ?? `runs/eval-${args.policy}-${stamp()}.json`);
    const faults = new Set(cases.map((c) => c.faultId)).size;
    const isAgent = result.requests.some((r) => r.stopReason !== undefined);
    const def = getPolicy(args.policy);
    const protocol = args.protocol ?? (def.kind === 'agent' ? def.protocol : undefined) ?? 'rot';
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(
      out,
      `${JSON.stringify(
        {
          dataset: { dir, name: dataset.meta.name },
          policy: args.policy,
          protocol: isAgent ? protocol : null,
          createdAt: new Date().toISOString(),
          cases: cases.length,
          ...result,
        },
        null,
        1,
      )}\n`,
    );
    const errors = result.requests.filter((r) => r.error).length;
    console.log(`dataset ${dataset.meta.name}: policy ${args.policy}${isAgent ? ` (protocol ${protocol})` : ''}, ${cases.length} requests of ${faults} faults`);
    console.log(formatSummary(result, result.levels));
    if (errors) console.log(`${errors} request(s) failed (counted as misses; see "error" in the JSON)`);
    console.log(`results: ${out}`);
  },
};
