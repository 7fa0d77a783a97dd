/**
 * The README's tables of every registered policy (expert, classic baselines, the seed systems'
 * scripted stand-ins) on one dataset: per-fault service Recall@1/3/5 and MRR with the fault
 * ranked by its best request and by the majority vote of its requests (RCLAgent Eq. 10), and
 * the per-request service MRR; each policy's row is followed by one row per fault type, so that a
 * gain on one type cannot hide a loss on another. Prints Markdown.
 *
 * With --regression FILE it writes the expert's regression table instead (its per-fault figures
 * with its default settings, packages/env/test/policies-expert-regression.test.ts); with --at
 * COMMIT too, the expert of that commit, played by that commit's own code (importer, tools,
 * evaluation) in a temporary git worktree beside this one.
 *
 *   npx tsx scripts/policy-table.ts [--dataset DIR]
 *   npx tsx scripts/policy-table.ts --regression FILE [--at COMMIT]
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { evaluate, getPolicy, loadDataset, policyNames, solverFor, summarizeRanks, type RankSummary } from '@thinkfl/env';
import { type FaultInfo, faultRows, outcomesOf, type RequestOutcome, summarizeRows } from '../packages/env/src/eval/fault-table';
import { ensureNezhaDataset, REPO_ROOT } from '../testkit/nezha';

const argv = await yargs(hideBin(process.argv))
  .scriptName('policy-table')
  .strict()
  .option('dataset', { type: 'string', describe: 'imported dataset dir (default: the test cache of Nezha 2023-01-29)' })
  .option('regression', { type: 'string', describe: "write the expert's regression table (JSON) to this file" })
  .option('at', { type: 'string', describe: 'with --regression: the commit whose expert to table (default: this tree)' })
  .parse();

/**
 * Service-level outcomes of the expert at another commit: a worktree of it beside this one (its
 * testkit finds ../shared from there), this checkout's npm packages linked in, and a runner that
 * uses only what every commit's @thinkfl/env has (evaluate, solverFor, loadDataset).
 */
function outcomesAt(commit: string): { faults: FaultInfo[]; requests: RequestOutcome[] } {
  const dir = join(REPO_ROOT, '..', `.expert-at-${commit}`);
  execFileSync('git', ['worktree', 'add', '--detach', '--force', dir, commit], { cwd: REPO_ROOT, stdio: 'ignore' });
  try {
    mkdirSync(join(dir, 'node_modules', '@thinkfl'), { recursive: true });
    for (const e of readdirSync(join(REPO_ROOT, 'node_modules'))) {
      if (e !== '@thinkfl') symlinkSync(join(REPO_ROOT, 'node_modules', e), join(dir, 'node_modules', e));
    }
    for (const p of readdirSync(join(dir, 'packages')))
      symlinkSync(join('..', '..', 'packages', p), join(dir, 'node_modules', '@thinkfl', p));
    const out = join(dir, 'outcomes.json');
    writeFileSync(
      join(dir, 'scripts', 'expert-outcomes.ts'),
      `import { writeFileSync } from 'node:fs';
import { evaluate, loadDataset, solverFor } from '@thinkfl/env';
import { ensureNezhaDataset } from '../testkit/nezha';
const ds = await loadDataset(await ensureNezhaDataset());
const r = await evaluate(ds, ds.cases, solverFor(ds, 'expert'));
writeFileSync(${JSON.stringify(out)}, JSON.stringify({
  faults: r.faults.map((f) => ({ faultId: f.fault_id, type: f.type, service: f.truth.service ?? '' })),
  requests: r.requests.map((q) => ({ faultId: q.fault_id, rank: q.ranks.service ?? null, top: q.answer?.find((a) => a.service)?.service ?? null })),
}));
`,
    );
    execFileSync(join(REPO_ROOT, 'node_modules', '.bin', 'tsx'), ['scripts/expert-outcomes.ts'], { cwd: dir, stdio: 'inherit' });
    return JSON.parse(readFileSync(out, 'utf8'));
  } finally {
    execFileSync('git', ['worktree', 'remove', '--force', dir], { cwd: REPO_ROOT, stdio: 'ignore' });
  }
}

if (argv.regression) {
  let o: ReturnType<typeof outcomesOf>;
  if (argv.at) o = outcomesAt(argv.at);
  else {
    const ds = await loadDataset(argv.dataset ?? (await ensureNezhaDataset()));
    o = outcomesOf(await evaluate(ds, ds.cases, solverFor(ds, 'expert')));
  }
  const at = argv.at ? execFileSync('git', ['rev-parse', '--short', argv.at], { cwd: REPO_ROOT, encoding: 'utf8' }).trim() : undefined;
  const what = `the scripted expert${at ? ` of ${at}` : ''} with its default settings on every case of Nezha 2023-01-29, service level: per fault the best rank among its requests, the rank by their majority vote (0-based, null: absent) and their MRR`;
  const command = `npx tsx scripts/policy-table.ts --regression FILE${at ? ` --at ${at}` : ''}`;
  // One fault a line, so that a change of the table reads fault by fault in a diff.
  const rows = faultRows(o.faults, o.requests).map((r) => `  ${JSON.stringify(r)}`);
  writeFileSync(
    argv.regression,
    `{\n "what": ${JSON.stringify(what)},\n "command": ${JSON.stringify(command)},\n "faults": [\n${rows.join(',\n')}\n ]\n}\n`,
  );
  process.exit(0);
}

const ds = await loadDataset(argv.dataset ?? (await ensureNezhaDataset()));
const pct = (x: number) => (100 * x).toFixed(1);
const cells = (s: RankSummary) => [pct(s.recall[1]), pct(s.recall[3]), pct(s.recall[5]), s.mrr.toFixed(3)];
const faults = new Set(ds.cases.map((c) => c.fault_id)).size;
const types = [...new Set(ds.cases.map((c) => ds.faults.find((f) => f.id === c.fault_id)?.type ?? 'unknown'))].sort();
console.log(
  `Nezha ${ds.meta.name}: ${ds.cases.length} requests of ${faults} faults, service level; each policy's row, then a row per fault type.\n`,
);
console.log('| policy | protocol | best R@1 | best R@3 | best R@5 | best MRR | vote R@1 | vote R@3 | vote R@5 | vote MRR | request MRR |');
console.log('| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |');
for (const name of policyNames()) {
  const def = getPolicy(name);
  const r = await evaluate(ds, ds.cases, solverFor(ds, name));
  const protocol = def.kind === 'agent' ? (def.protocol ?? 'rot') : '(ranker)';
  const label = name.endsWith('-script') ? `${name.replace(/-script$/, '')}-scripted` : name;
  console.log(
    `| ${label} | ${protocol} | ${[...cells(r.per_fault.service!), ...cells(r.per_fault_vote!.service!), r.per_request.service!.mrr.toFixed(3)].join(' | ')} |`,
  );
  const o = outcomesOf(r);
  const rows = faultRows(o.faults, o.requests);
  for (const type of types) {
    const of = rows.filter((x) => x.type === type);
    const best = summarizeRanks(of.map((x) => x.best));
    const vote = summarizeRanks(of.map((x) => x.vote));
    console.log(
      `| ${label}: ${type} (${of.length} faults) | | ${[...cells(best), ...cells(vote), summarizeRows(of).request.toFixed(3)].join(' | ')} |`,
    );
  }
}
