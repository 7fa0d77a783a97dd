/**
 * Benchmark: loadDataset on the real Nezha 2023-01-29 import against the bare JSON.parse of
 * the same files (the floor any JSON-based format pays), in the same run. Prints the median
 * of each over a few rounds and their ratio.
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
const load = [];
const parse = [];
for (let i = 0; i < Number(values.rounds); i++) {
  parse.push(await timed(parseOnly));
  load.push(await timed(() => loadDataset(dir)));
}
const ds = await loadDataset(dir);
console.log(`dataset: ${ds.traces.size} spans, ${ds.faults.length} faults, ${ds.cases.length} cases`);
console.log(`JSON.parse only: ${median(parse).toFixed(0)} ms (median of ${parse.length})`);
console.log(`loadDataset:     ${median(load).toFixed(0)} ms (median of ${load.length})`);
console.log(`ratio loadDataset / JSON.parse: ${(median(load) / median(parse)).toFixed(2)}`);
