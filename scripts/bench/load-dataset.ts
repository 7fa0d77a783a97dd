/**
 * Benchmark: loadDataset on the real Nezha 2023-01-29 import against the bare JSON.parse of
 * the same files (the floor any JSON-based format pays, were every part read), in the same run:
 * loadDataset alone (logs.json and metrics.json are parsed at their first query) and loadDataset
 * followed by one log and one metric query (every part read). Prints the median of each over a
 * few rounds and their ratios to JSON.parse.
 *
 *   npx tsx scripts/bench/load-dataset.ts [--rounds N]
 */
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadDataset } from '@thinkfl/env';
import { ensureNezhaDataset } from '../../testkit/nezha';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '5' } } });

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}

async function timed(f: () => Promise<unknown>): Promise<number> {
  const t = performance.now();
  await f();
  return performance.now() - t;
}

const dir = await ensureNezhaDataset();
const files = (await readdir(dir)).filter((f) => f.endsWith('.json'));
const parseOnly = async () => Promise.all(files.map(async (f) => JSON.parse(await readFile(join(dir, f), 'utf8'))));
const loadAndQuery = async () => {
  const ds = await loadDataset(dir);
  const c = ds.topology.pods[0].pod;
  ds.logs.query(c, 0, Number.MAX_SAFE_INTEGER);
  ds.metrics.series(c);
};
const load = [];
const parse = [];
const full = [];
for (let i = 0; i < Number(values.rounds); i++) {
  parse.push(await timed(parseOnly));
  load.push(await timed(() => loadDataset(dir)));
  full.push(await timed(loadAndQuery));
}
const ds = await loadDataset(dir);
const n = parse.length;
console.log(`dataset: ${ds.traces.size} spans, ${ds.faults.length} faults, ${ds.cases.length} cases`);
console.log(`JSON.parse of every part:         ${median(parse).toFixed(0)} ms (median of ${n})`);
console.log(`loadDataset:                      ${median(load).toFixed(0)} ms (median of ${n})`);
console.log(`loadDataset, a log and a metric query: ${median(full).toFixed(0)} ms (median of ${n})`);
console.log(`ratio loadDataset / JSON.parse: ${(median(load) / median(parse)).toFixed(2)}`);
console.log(`ratio loadDataset with queries / JSON.parse: ${(median(full) / median(parse)).toFixed(2)}`);
