/**
 * Probe (issue 13): per-fault and per-request service MRR on the held-out and training cases of
 * a run config for rules a tiny model could follow from what search_traces shows, beside
 * selftime and MicroRank. Prints per fault its type, truth service and each rule's best rank.
 *
 *   npx tsx scripts/heldout-rules.ts [--config configs/cpu-learn.yaml]
 */
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { evaluate, loadDataset, solverFor, type Case, type Dataset, type RootCause, type Span } from '@thinkfl/env';
import { loadRunConfig } from '../packages/trainer-ctl/src/config/index';
import { runCases } from '../packages/trainer-ctl/src/controller/cases';

const argv = await yargs(hideBin(process.argv)).option('config', { type: 'string', default: 'configs/cpu-learn.yaml' }).parse();
const { config } = loadRunConfig(argv.config);
const dataset = await loadDataset(config.dataset.path);
const split = runCases(dataset, config);

function abnormality(d: Dataset, s: Span): number {
  const u = d.baseline.duration(s);
  const ratio = u && u.meanUs > 0 ? s.durationUs / u.meanUs : 1;
  let v = 0;
  if (s.status === 'error') v += 100;
  if (ratio >= 2) v += ratio;
  return v;
}

/** Descend from the entry into the most abnormal child while one is abnormal; deepest first. */
function descend(d: Dataset, c: Case): RootCause[] {
  const path: Span[] = [];
  let cur = d.traces.span(c.entrySpanId)!;
  path.push(cur);
  for (;;) {
    const kids = d.traces.children(cur.spanId);
    let best: Span | undefined;
    let bv = 0;
    for (const k of kids) {
      const v = abnormality(d, k);
      if (v > bv) { bv = v; best = k; }
    }
    if (!best) break;
    cur = best;
    path.push(cur);
  }
  const seen = new Set<string>();
  const out: RootCause[] = [];
  for (const s of path.reverse()) {
    if (seen.has(s.service)) continue;
    seen.add(s.service);
    out.push({ service: s.service, pod: s.pod });
  }
  return out;
}

const mrr = (m: { service?: { mrr: number } } | undefined) => (m?.service ? m.service.mrr.toFixed(3) : '-');
for (const [label, cases] of [['held-out', split.eval], ['train', split.train]] as const) {
  console.log(`\n${label}: ${cases.length} cases, ${new Set(cases.map((c) => c.faultId)).size} faults`);
  const solvers: [string, (c: Case) => Promise<{ answer: RootCause[] }>][] = [
    ['descend', async (c) => ({ answer: descend(dataset, c) })],
    ['selftime', solverFor(dataset, 'selftime') as never],
    ['microrank', solverFor(dataset, 'microrank') as never],
  ];
  const per = new Map<string, string[]>();
  for (const [name, solve] of solvers) {
    const r = await evaluate(dataset, cases, solve);
    console.log(`${name}: per-fault ${mrr(r.perFault)} vote ${mrr(r.perFaultVote)} per-request ${mrr(r.perRequest)}`);
    for (const f of r.faults ?? []) {
      const key = f.faultId;
      per.set(key, [...(per.get(key) ?? []), `${name}=${f.ranks.service}/${f.voteRanks.service}`]);
    }
  }
  for (const f of dataset.faults.filter((f) => cases.some((c) => c.faultId === f.id))) {
    console.log(`  ${f.id} ${f.type} ${f.truth.service} cases=${cases.filter((c) => c.faultId === f.id).length} ${(per.get(f.id) ?? []).join(' ')}`);
  }
}
