/**
 * Benchmark: search_traces through the indexed trace store against a brute-force scan of
 * the same spans by parent_id, on the real Nezha 2023-01-29 dataset, in the same run.
 * Prints the median latency per call of each and their ratio.
 *
 *   npx tsx scripts/bench/search-traces.ts [--sample N] [--scan-sample N]
 */
import { parseArgs } from 'node:util';
import { loadDataset, Toolbox, type Span } from '@thinkfl/env';
import { ensureNezhaDataset } from '../../testkit/nezha';

const { values } = parseArgs({
  options: {
    /** Span ids timed through search_traces (all spans when larger than the dataset). */
    sample: { type: 'string', default: '50000' },
    /** Span ids timed with the scan (each scan reads every span, so fewer). */
    'scan-sample': { type: 'string', default: '200' },
  },
});

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** Every k-th element so the sample spreads over the whole dataset. */
function spread<T>(xs: T[], n: number): T[] {
  if (n >= xs.length) return xs;
  const step = xs.length / n;
  return Array.from({ length: n }, (_, i) => xs[Math.floor(i * step)]);
}

function timeUs(f: () => unknown): number {
  const t0 = process.hrtime.bigint();
  f();
  return Number(process.hrtime.bigint() - t0) / 1000;
}

const dataset = await loadDataset(await ensureNezhaDataset());
const spans: Span[] = [];
for (const id of dataset.traces.traceIds()) spans.push(...dataset.traces.trace(id));
const toolbox = new Toolbox(dataset);

const toolIds = spread(spans, Number(values.sample)).map((s) => s.span_id);
const scanIds = spread(spans, Number(values['scan-sample'])).map((s) => s.span_id);

// The scan does what the index saves: read every span, keep the children, order them.
const scan = (id: string): Span[] => spans.filter((s) => s.parent_id === id).sort((a, b) => a.start_us - b.start_us);

// Warm both paths up so JIT compilation is not timed.
for (const id of toolIds.slice(0, 200)) toolbox.call('search_traces', { parent_span_id: id });
for (const id of scanIds.slice(0, 5)) scan(id);

let bad = 0;
const toolUs = toolIds.map((id) =>
  timeUs(() => {
    if (!toolbox.call('search_traces', { parent_span_id: id }).ok) bad++;
  }),
);
const scanUs = scanIds.map((id) => timeUs(() => scan(id)));
// Both paths must agree on what they find, or the comparison means nothing.
for (const id of scanIds) {
  if (scan(id).length !== dataset.traces.children(id).length) throw new Error(`index and scan disagree on ${id}`);
}
if (bad) throw new Error(`${bad} search_traces calls failed`);

const tool = median(toolUs);
const brute = median(scanUs);
console.log(`spans in dataset:                 ${spans.length}`);
console.log(`search_traces median per call:    ${tool.toFixed(1)} µs over ${toolIds.length} calls`);
console.log(`scan by parentId median per call: ${brute.toFixed(1)} µs over ${scanIds.length} calls`);
console.log(`ratio (scan / search_traces):     ${(brute / tool).toFixed(0)}x`);
