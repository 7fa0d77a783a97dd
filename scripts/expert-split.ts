/**
 * The scripted expert on a stated split of the Nezha 2023-01-29 faults: faults with cases in
 * time order, even positions (0, 2, ...) are the tuning half, odd positions the reported half.
 * Prints per half and per fault type the per-fault and per-request service Recall@1 and MRR.
 *
 *   npx tsx scripts/expert-split.ts [--dataset DIR] [--policy expert] [--settings JSON] [--tools JSON] [--half tuning|reported]
 */
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { evaluate, loadDataset, solverFor, summarizeRanks } from '@thinkfl/env';
import { ensureNezhaDataset } from '../testkit/nezha';

const argv = await yargs(hideBin(process.argv))
  .scriptName('expert-split')
  .strict()
  .option('dataset', { type: 'string', describe: 'imported dataset dir (default: the test cache of 2023-01-29)' })
  .option('policy', { type: 'string', default: 'expert' })
  .option('settings', { type: 'string', describe: "the policy's settings as JSON, e.g. {\"log_survey\":5} (default: its defaults)" })
  .option('tools', { type: 'string', describe: 'tool settings as JSON, e.g. {\"silentMaxRatio\":0.3} (default: their defaults)' })
  .option('half', { choices: ['tuning', 'reported'] as const, describe: 'run one half only (default both)' })
  .parse();

const ds = await loadDataset(argv.dataset ?? (await ensureNezhaDataset()));
const faults = [...new Set(ds.cases.map((c) => c.faultId))].sort((a, b) => ds.faults.find((f) => f.id === a)!.startUs - ds.faults.find((f) => f.id === b)!.startUs);
const half = (id: string) => (faults.indexOf(id) % 2 === 0 ? 'tuning' : 'reported');
const halves = argv.half ? [argv.half] : ['tuning', 'reported'];
const settings = argv.settings === undefined ? undefined : (JSON.parse(argv.settings) as Record<string, unknown>);
const toolSettings = argv.tools === undefined ? undefined : (JSON.parse(argv.tools) as Record<string, unknown>);
const episode = toolSettings ? { toolSettings } : undefined;
const r = await evaluate(ds, ds.cases.filter((c) => halves.includes(half(c.faultId))), solverFor(ds, argv.policy, { settings, episode }));
const fmt = (label: string, faultIds: Set<string>) => {
  const f = summarizeRanks(r.faults.filter((x) => faultIds.has(x.faultId)).map((x) => x.ranks.service ?? null));
  const q = summarizeRanks(r.requests.filter((x) => faultIds.has(x.faultId)).map((x) => x.ranks.service ?? null));
  return `${label.padEnd(28)} faults ${String(f.n).padStart(3)}  per-fault R@1 ${(100 * f.recall[1]).toFixed(1).padStart(5)} MRR ${f.mrr.toFixed(3)}  per-request n ${String(q.n).padStart(3)} R@1 ${(100 * q.recall[1]).toFixed(1).padStart(5)} MRR ${q.mrr.toFixed(3)}`;
};
console.log(`policy ${argv.policy}${settings ? ` ${JSON.stringify(settings)}` : ''}${toolSettings ? ` tools ${JSON.stringify(toolSettings)}` : ''}; split: faults with cases by start time, even positions tuning, odd positions reported`);
for (const h of halves) {
  const ids = faults.filter((f) => half(f) === h);
  console.log(fmt(`${h}, all`, new Set(ids)));
  for (const type of [...new Set(ids.map((id) => ds.faults.find((f) => f.id === id)!.type))].sort()) {
    console.log(fmt(`${h}, ${type}`, new Set(ids.filter((id) => ds.faults.find((f) => f.id === id)!.type === type))));
  }
}
if (halves.includes('reported')) console.log(`reported faults: ${faults.filter((f) => half(f) === 'reported').join(', ')}`);
