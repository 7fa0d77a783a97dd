/**
 * Benchmark: loadDataset on the real Nezha 2023-01-29 import against the bare JSON.parse of
 * the same files (the floor any JSON-based format pays, were every part read), in the same run:
 * loadDataset alone (logs.json and metrics.json are parsed at their first query) and loadDataset
 * followed by one log and one metric query (every part read). Prints the median of each over a
 * few rounds (wall, this process's CPU, and the heap the result holds after a full GC) and their
 * ratios to JSON.parse.
 *
 *   npx tsx scripts/bench/load-dataset.ts [--rounds N]
 */
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { loadDataset } from '@thinkfl/env';
import { ensureNezhaDataset } from '../../testkit/nezha';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '5' } } });

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[s.length >> 1];
}

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

interface Cost {
  ms: number;
  cpuMs: number;
  heapMb: number;
}

async function measured(f: () => Promise<unknown>): Promise<Cost> {
  gc();
  const heap = process.memoryUsage().heapUsed;
  const cpu = process.cpuUsage();
  const t = performance.now();
  const kept = await f();
  const ms = performance.now() - t;
  const used = process.cpuUsage(cpu);
  gc();
  const heapMb = (process.memoryUsage().heapUsed - heap) / 2 ** 20;
  void kept;
  return { ms, cpuMs: (used.user + used.system) / 1000, heapMb };
}

const dir = await ensureNezhaDataset();
const files = (await readdir(dir)).filter((f) => f.endsWith('.json'));
const parseOnly = async () => Promise.all(files.map(async (f) => JSON.parse(await readFile(join(dir, f), 'utf8'))));
const loadAndQuery = async () => {
  const ds = await loadDataset(dir);
  const c = ds.topology.pods[0].pod;
  ds.logs.query(c, 0, Number.MAX_SAFE_INTEGER);
  ds.metrics.series(c);
  return ds;
};
const rows: [string, () => Promise<unknown>, Cost[]][] = [
  ['JSON.parse of every part', parseOnly, []],
  ['loadDataset', () => loadDataset(dir), []],
  ['loadDataset, a log and a metric query', loadAndQuery, []],
];
for (let i = 0; i < Number(values.rounds); i++) for (const [, f, costs] of rows) costs.push(await measured(f));
const ds = await loadDataset(dir);
console.log(`dataset: ${ds.traces.size} spans, ${ds.faults.length} faults, ${ds.cases.length} cases; medians of ${values.rounds}`);
const base = rows[0][2];
const med = (costs: Cost[], k: keyof Cost) => median(costs.map((c) => c[k]));
for (const [name, , costs] of rows) {
  const ratio = (k: keyof Cost) => (med(costs, k) / med(base, k)).toFixed(2);
  console.log(
    `${name.padEnd(40)} ${med(costs, 'ms').toFixed(0).padStart(5)} ms wall (${ratio('ms')}x), ` +
      `${med(costs, 'cpuMs').toFixed(0).padStart(5)} ms CPU (${ratio('cpuMs')}x), ${med(costs, 'heapMb').toFixed(0).padStart(4)} MB heap held (${ratio('heapMb')}x)`,
  );
}
