/**
 * What a run config's SFT teacher can teach (issue 13): the scripted expert with the config's
 * teacher settings and episode settings (D_max, tool settings), on the config's training and
 * held-out cases, beside selftime and MicroRank: per-fault service MRR by best request and by
 * majority vote, per-request MRR, requests answered right first, and per fault its type and the
 * expert's best rank; then how often the teacher's search_traces call opens the child listed
 * first (second, ...) in the result before it, and per fault in how many cases the true service
 * is in one of its search_traces results (an answer by span can only name what was shown).
 * --d-max overrides the config's episode.d_max (the teacher's turn budget).
 *
 *   npx tsx scripts/heldout-rules.ts [--config configs/cpu-learn.yaml] [--d-max N]
 */
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import {
  createExpert,
  evaluate,
  ExpertSettingsSchema,
  loadDataset,
  parseEpisodeSettings,
  runEpisode,
  solverFor,
  type SearchTracesData,
  type Solve,
} from '@thinkfl/env';
import { loadRunConfig } from '../packages/trainer-ctl/src/config/index';
import { runCases } from '../packages/trainer-ctl/src/controller/cases';

const argv = await yargs(hideBin(process.argv))
  .scriptName('heldout-rules')
  .strict()
  .option('config', { type: 'string', default: 'configs/cpu-learn.yaml', describe: 'run config whose teacher and cases to use' })
  .option('d-max', { type: 'number', describe: "the teacher's turn budget instead of the config's episode.d_max" })
  .parse();
const { config } = loadRunConfig(argv.config);
if (argv.dMax !== undefined) config.episode.d_max = argv.dMax;
const dataset = await loadDataset(config.dataset.path);
const split = runCases(dataset, config);
const mrr = (m: { service?: { mrr: number } } | undefined): string => (m?.service ? m.service.mrr.toFixed(3) : '-');
const solvers: [string, Solve][] = [
  ['teacher (expert)', solverFor(dataset, 'expert', { settings: config.stages.priming.sft.teacher, episode: config.episode })],
  ['selftime', solverFor(dataset, 'selftime')],
  ['microrank', solverFor(dataset, 'microrank')],
];
for (const [label, cases] of [
  ['held-out', split.eval],
  ['training', split.train],
] as const) {
  console.log(`\n${label}: ${cases.length} cases of ${new Set(cases.map((c) => c.fault_id)).size} faults`);
  for (const [name, solve] of solvers) {
    const r = await evaluate(dataset, cases, solve);
    const first = r.requests.filter((q) => q.ranks.service === 0).length;
    const faults = r.faults.map((f) => `${f.type}:${f.ranks.service ?? '-'}`).join(' ');
    console.log(
      `${name}: per-fault ${mrr(r.per_fault)} vote ${mrr(r.per_fault_vote)} per-request ${mrr(r.per_request)}, right first ${first}/${cases.length} [${faults}]`,
    );
  }
}

const episode = parseEpisodeSettings(config.episode);
const expert = ExpertSettingsSchema.parse(config.stages.priming.sft.teacher);
for (const [label, cases] of [
  ['held-out', split.eval],
  ['training', split.train],
] as const) {
  const at = new Map<string, number>();
  const faults = new Map<string, { cases: number; inView: number; first: number }>();
  let calls = 0;
  for (const c of cases) {
    const record = await runEpisode({ dataset, case: c, policy: createExpert(dataset, expert), protocol: 'rot', settings: episode });
    const f = faults.get(c.fault_id) ?? { cases: 0, inView: 0, first: 0 };
    faults.set(c.fault_id, f);
    const services = new Set<string>();
    let last: SearchTracesData | undefined;
    for (const t of record.tool_calls) {
      if (t.name !== 'search_traces' || !t.observation.ok) continue;
      const d = t.observation.data as SearchTracesData;
      for (const s of [d.parent, ...d.children]) services.add(s.service);
      const asked = String((t.arguments as { parent_span_id: string }).parent_span_id);
      if (last) {
        const i = last.children.findIndex((k) => k.ref === asked || k.span_id === asked);
        const key = i < 0 ? 'an earlier result' : `child ${i + 1}`;
        at.set(key, (at.get(key) ?? 0) + 1);
        calls++;
      }
      last = d;
    }
    f.cases++;
    if (c.truth.service !== undefined && services.has(c.truth.service)) f.inView++;
    if (record.answer?.[0]?.service === c.truth.service) f.first++;
  }
  console.log(
    `\n${label}: the teacher's ${calls} search_traces calls after the first open ${[...at]
      .sort()
      .map(([k, n]) => `${k} ${n}`)
      .join(', ')}`,
  );
  console.log('per fault: cases, cases whose true service is in a search_traces result, cases the teacher answers right first');
  for (const [id, f] of faults) {
    const fault = dataset.faults.find((x) => x.id === id)!;
    console.log(`  ${id} ${fault.type} ${fault.truth.service}: ${f.cases} ${f.inView} ${f.first}`);
  }
  const sum = (k: 'cases' | 'inView' | 'first') => [...faults.values()].reduce((a, f) => a + f[k], 0);
  console.log(`  all: ${sum('cases')} ${sum('inView')} ${sum('first')}`);
}
