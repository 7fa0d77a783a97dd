/**
 * The scripted expert's tuned constants chosen by leave-one-fault-out over the faults of the
 * shipped day (Nezha 2023-01-29, every fault type). Every setting combination of the grid is
 * played once on all cases; then for each fault, the combination that the choice rule prefers
 * on the other faults is scored on that fault alone. Prints, by fault type, the held-out figures
 * (the mean over folds and the worst fold) beside the in-sample figures of the combination the
 * rule prefers on all faults (the defaults to ship), and which combination each fold chose.
 *
 * Choice rule (the issue-27 bars): the largest min(best/0.8, vote/0.6, request/0.4) of per-fault
 * MRR by best request, by vote and per-request MRR; ties by the sum of the three ratios, then
 * by grid order.
 *
 *   npx tsx scripts/expert-split.ts [--dataset DIR] [--grid JSON] [--baseline FILE] [--save FILE] [--load FILE]
 */
import { readFileSync, writeFileSync } from 'node:fs';
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { evaluate, ExpertSettingsSchema, loadDataset, solverFor } from '@thinkfl/env';
import { type FaultRow, faultRows, faultTypes, outcomesOf, summarizeRows } from '../packages/env/src/eval/fault-table';
import { ensureNezhaDataset } from '../testkit/nezha';

/**
 * The constants tuned on the day (by issue 12's work, and slow_path_share by issue 27's), and the
 * values tried, the first of each its former default. The expert's other settings and its kinds'
 * fixed scores date from before any tuning on this day and are not tuned.
 */
const TUNED: Record<string, unknown[]> = {
  slow_path_share: [1, 0.5, 0.75, null],
  lead_checks: [3, 2, 4],
  log_survey: [3, 2, 5],
  caller_error_weight: [0.6, 0.3, 1],
  calm_fast_lead_bonus: [0.7, 0],
  silent_log_weight: [1.5, 1, 2],
};

const argv = await yargs(hideBin(process.argv))
  .scriptName('expert-split')
  .strict()
  .option('dataset', { type: 'string', describe: 'imported dataset dir (default: the test cache of 2023-01-29)' })
  .option('grid', { type: 'string', describe: 'the grid as JSON {setting: [values]} (default: the constants tuned on the day)' })
  .option('baseline', {
    type: 'string',
    describe: "a pinned table of another expert's rows (e.g. packages/env/test/expert-regression-aa41d73.json) to print beside",
  })
  .option('save', { type: 'string', describe: "write every combination's rows to this JSON file" })
  .option('load', { type: 'string', describe: 'read the rows from a file --save wrote instead of playing' })
  .parse();

type Combo = Record<string, unknown>;
const grid = argv.grid ? (JSON.parse(argv.grid) as Record<string, unknown[]>) : TUNED;
const combos: Combo[] = Object.entries(grid).reduce<Combo[]>((acc, [k, vs]) => acc.flatMap((c) => vs.map((v) => ({ ...c, [k]: v }))), [{}]);

let played: { combo: Combo; rows: FaultRow[] }[];
if (argv.load) played = JSON.parse(readFileSync(argv.load, 'utf8'));
else {
  const ds = await loadDataset(argv.dataset ?? (await ensureNezhaDataset()));
  played = [];
  for (const [i, combo] of combos.entries()) {
    const o = outcomesOf(await evaluate(ds, ds.cases, solverFor(ds, 'expert', { settings: combo })));
    played.push({ combo, rows: faultRows(o.faults, o.requests) });
    process.stderr.write(`\r${i + 1}/${combos.length} combinations played`);
  }
  process.stderr.write('\n');
  if (argv.save) writeFileSync(argv.save, JSON.stringify(played));
}

const BARS = { best: 0.8, vote: 0.6, request: 0.4 };
function merit(rows: FaultRow[]): [number, number] {
  const s = summarizeRows(rows);
  const ratios = [s.best / BARS.best, s.vote / BARS.vote, s.request / BARS.request];
  return [Math.min(...ratios), ratios.reduce((a, b) => a + b, 0)];
}
/** Index of the combination the rule prefers on the faults `keep` accepts. */
function choose(keep: (faultId: string) => boolean): number {
  let best = 0;
  let bestM: [number, number] = [-1, -1];
  played.forEach((p, i) => {
    const m = merit(p.rows.filter((r) => keep(r.faultId)));
    if (m[0] > bestM[0] || (m[0] === bestM[0] && m[1] > bestM[1])) {
      best = i;
      bestM = m;
    }
  });
  return best;
}

const label = (c: Combo): string =>
  Object.entries(c)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');
const rr = (r: number | null): number => (r === null ? 0 : 1 / (r + 1));
const f3 = (x: number): string => x.toFixed(3);

const shipped = played[choose(() => true)];
const faults = shipped.rows.map((r) => r.faultId);
const heldOut: (FaultRow & { chose: number })[] = faults.map((id) => {
  const i = choose((f) => f !== id);
  return { ...played[i].rows.find((r) => r.faultId === id)!, chose: i };
});
const baseline: FaultRow[] | undefined = argv.baseline ? JSON.parse(readFileSync(argv.baseline, 'utf8')).faults : undefined;

console.log(`${played.length} combinations of ${Object.keys(grid).join(', ')}; ${faults.length} faults, one fold each.`);
const defaults = ExpertSettingsSchema.parse({}) as Record<string, unknown>;
const differ = Object.entries(shipped.combo).filter(([k, v]) => defaults[k] !== v);
console.log(
  `Chosen on all faults: ${label(shipped.combo)} (${differ.length ? `NOT the expert's defaults: ${differ.map(([k]) => `${k}=${defaults[k]}`).join(' ')}` : "the expert's defaults"})`,
);
const ranked = played.map((p, i) => ({ i, m: merit(p.rows) })).sort((a, b) => b.m[0] - a.m[0] || b.m[1] - a.m[1]);
console.log('Best 5 on all faults, min and sum of best/0.8, vote/0.6, request/0.4:');
for (const { i, m } of ranked.slice(0, 5)) console.log(`  ${f3(m[0])} ${f3(m[1])}  ${label(played[i].combo)}`);
console.log('');
const of =
  (type: string) =>
  <T extends FaultRow>(rows: T[]): T[] =>
    rows.filter((r) => type === 'all' || r.type === type);
const worstOf = (rows: FaultRow[], value: (r: FaultRow) => number): string => {
  const w = rows.reduce((a, r) => (value(r) < value(a) ? r : a));
  return `${f3(value(w))} (${w.faultId.slice(-6)})`;
};
const ins = summarizeRows(shipped.rows);
const out = summarizeRows(heldOut);
const base = baseline && summarizeRows(baseline);
console.log(`| measure (service level) | in-sample | leave-one-fault-out | worst fold${base ? ' | baseline' : ''} |`);
console.log(`| --- | --- | --- | ---${base ? ' | ---' : ''} |`);
const measures: [string, keyof ReturnType<typeof summarizeRows>, (r: FaultRow) => number][] = [
  ['per-request MRR', 'request', (r) => r.requestMrr],
  ['per-request R@10', 'requestR10', (r) => r.top10 / r.requests],
  ['per-fault MRR (best request)', 'best', (r) => rr(r.best)],
  ['per-fault MRR by vote', 'vote', (r) => rr(r.vote)],
  ['RCLAgent-V2 batches of 10 (MRR)', 'batch', (r) => summarizeRows([r]).batch],
];
for (const [name, key, value] of measures) {
  console.log(`| ${name} | ${f3(ins[key])} | ${f3(out[key])} | ${worstOf(heldOut, value)}${base ? ` | ${f3(base[key])}` : ''} |`);
}
console.log(
  `\n| fault type | faults | requests | in-sample best / vote / request MRR | leave-one-fault-out best / vote / request MRR | worst fold best / vote / request${baseline ? ' | baseline best / vote / request MRR' : ''} |`,
);
console.log(`| --- | --- | --- | --- | --- | --- |${baseline ? ' --- |' : ''}`);
for (const type of ['all', ...faultTypes(shipped.rows)]) {
  const a = summarizeRows(of(type)(shipped.rows));
  const b = summarizeRows(of(type)(heldOut));
  const w = of(type)(heldOut);
  const cells = [
    type,
    String(a.faults),
    String(a.requests),
    `${f3(a.best)} / ${f3(a.vote)} / ${f3(a.request)}`,
    `${f3(b.best)} / ${f3(b.vote)} / ${f3(b.request)}`,
    `${worstOf(w, (r) => rr(r.best))} / ${worstOf(w, (r) => rr(r.vote))} / ${worstOf(w, (r) => r.requestMrr)}`,
  ];
  if (baseline) {
    const c = summarizeRows(of(type)(baseline));
    cells.push(`${f3(c.best)} / ${f3(c.vote)} / ${f3(c.request)}`);
  }
  console.log(`| ${cells.join(' | ')} |`);
}

console.log(
  `\nPer fault (held out): best rank, vote rank, request MRR, the combination its fold chose${baseline ? "; the baseline's best rank" : ''}`,
);
for (const r of heldOut) {
  const b = baseline?.find((x) => x.faultId === r.faultId);
  const lost = b && b.best === 0 && r.best !== 0 ? '  LOST (baseline first)' : '';
  console.log(
    `  ${r.faultId} ${r.type.padEnd(14)} ${r.service.padEnd(28)} best ${String(r.best).padStart(4)} vote ${String(r.vote).padStart(4)} request ${f3(r.requestMrr)}  [${label(played[r.chose].combo)}]${b ? `  baseline best ${b.best}` : ''}${lost}`,
  );
}
const counts = new Map<number, number>();
for (const r of heldOut) counts.set(r.chose, (counts.get(r.chose) ?? 0) + 1);
console.log('\nCombinations the folds chose:');
for (const [i, n] of [...counts].sort((a, b) => b[1] - a[1])) console.log(`  ${n} fold(s): ${label(played[i].combo)}`);
