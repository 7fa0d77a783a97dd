/**
 * What a run config's SFT teacher can teach (issue 13): the scripted expert with the config's
 * teacher settings and episode settings (D_max, tool settings), on the config's training and
 * held-out cases, beside selftime and MicroRank: per-fault service MRR by best request and by
 * majority vote, per-request MRR, requests answered right first, and per fault its type and the
 * expert's best rank; then how often the teacher's search_traces call opens the child listed
 * first (second, ...) in the result before it.
 *
 *   npx tsx scripts/heldout-rules.ts [--config configs/cpu-learn.yaml]
 */
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { createExpert, evaluate, ExpertSettingsSchema, loadDataset, parseEpisodeSettings, runEpisode, solverFor, type SearchTracesData, type Solve } from '@thinkfl/env';
import { loadRunConfig } from '../packages/trainer-ctl/src/config/index';
import { runCases } from '../packages/trainer-ctl/src/controller/cases';

const argv = await yargs(hideBin(process.argv))
  .scriptName('heldout-rules')
  .strict()
  .option('config', { type: 'string', default: 'configs/cpu-learn.yaml', describe: 'run config whose teacher and cases to use' })
  .parse();
const { config } = loadRunConfig(argv.config);
const dataset = await loadDataset(config.dataset.path);
const split = runCases(dataset, config);
const mrr = (m: { service?: { mrr: number } } | undefined): string => (m?.service ? m.service.mrr.toFixed(3) : '-');
const solvers: [string, Solve][] = [
  ['teacher (expert)', solverFor(dataset, 'expert', { settings: config.stages.priming.sft.teacher, episode: config.episode })],
  ['selftime', solverFor(dataset, 'selftime')],
  ['microrank', solverFor(dataset, 'microrank')],
];
for (const [label, cases] of [['held-out', split.eval], ['training', split.train]] as const) {
  console.log(`\n${label}: ${cases.length} cases of ${new Set(cases.map((c) => c.faultId)).size} faults`);
  for (const [name, solve] of solvers) {
    const r = await evaluate(dataset, cases, solve);
    const first = r.requests.filter((q) => q.ranks.service === 0).length;
    const faults = r.faults.map((f) => `${f.type}:${f.ranks.service ?? '-'}`).join(' ');
    console.log(`${name}: per-fault ${mrr(r.perFault)} vote ${mrr(r.perFaultVote)} per-request ${mrr(r.perRequest)}, right first ${first}/${cases.length} [${faults}]`);
  }
}

const episode = parseEpisodeSettings(config.episode);
const expert = ExpertSettingsSchema.parse({ dMax: episode.dMax, ...config.stages.priming.sft.teacher });
for (const [label, cases] of [['held-out', split.eval], ['training', split.train]] as const) {
  const at = new Map<string, number>();
  let calls = 0;
  for (const c of cases) {
    const record = await runEpisode({ dataset, case: c, policy: createExpert(dataset, expert), protocol: 'rot', settings: episode });
    let last: SearchTracesData | undefined;
    for (const t of record.toolCalls) {
      if (t.name !== 'search_traces' || !t.observation.ok) continue;
      const asked = String((t.arguments as { parent_span_id: string }).parent_span_id);
      if (last) {
        const i = last.children.findIndex((k) => k.ref === asked || k.spanId === asked);
        const key = i < 0 ? 'an earlier result' : `child ${i + 1}`;
        at.set(key, (at.get(key) ?? 0) + 1);
        calls++;
      }
      last = t.observation.data as SearchTracesData;
    }
  }
  console.log(`\n${label}: the teacher's ${calls} search_traces calls after the first open ${[...at].sort().map(([k, n]) => `${k} ${n}`).join(', ')}`);
}
