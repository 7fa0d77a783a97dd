/**
 * The README's table of every registered policy (expert, classic baselines, the seed systems'
 * scripted stand-ins) on one dataset: per-fault service Recall@1/3/5 and MRR with the fault
 * ranked by its best request and by the majority vote of its requests (RCLAgent Eq. 10), and
 * the per-request service MRR. Prints Markdown.
 *
 *   npx tsx scripts/policy-table.ts [--dataset DIR]
 */
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { evaluate, getPolicy, loadDataset, policyNames, solverFor, type RankSummary } from '@thinkfl/env';
import { ensureNezhaDataset } from '../testkit/nezha';

const argv = await yargs(hideBin(process.argv))
  .scriptName('policy-table')
  .strict()
  .option('dataset', { type: 'string', describe: 'imported dataset dir (default: the test cache of Nezha 2023-01-29)' })
  .parse();

const ds = await loadDataset(argv.dataset ?? (await ensureNezhaDataset()));
const pct = (x: number) => (100 * x).toFixed(1);
const cells = (s: RankSummary) => [pct(s.recall[1]), pct(s.recall[3]), pct(s.recall[5]), s.mrr.toFixed(3)];
const faults = new Set(ds.cases.map((c) => c.faultId)).size;
console.log(`Nezha ${ds.meta.name}: ${ds.cases.length} requests of ${faults} faults, service level.\n`);
console.log('| policy | protocol | best R@1 | best R@3 | best R@5 | best MRR | vote R@1 | vote R@3 | vote R@5 | vote MRR | request MRR |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
for (const name of policyNames()) {
  const def = getPolicy(name);
  const r = await evaluate(ds, ds.cases, solverFor(ds, name));
  const protocol = def.kind === 'agent' ? (def.protocol ?? 'rot') : '(ranker)';
  const label = name.endsWith('-script') ? `${name.replace(/-script$/, '')}-scripted` : name;
  console.log(`| ${label} | ${protocol} | ${[...cells(r.perFault.service!), ...cells(r.perFaultVote!.service!), r.perRequest.service!.mrr.toFixed(3)].join(' | ')} |`);
}
