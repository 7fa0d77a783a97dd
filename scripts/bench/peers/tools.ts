/**
 * Tool loop: search_traces (the environment's indexed trace store) against a pandas filter of the
 * same spans by parent span id, sorted by start time (how ThinkFL's tool reads traces), and the
 * project's own brute-force scan (scripts/bench/search-traces.ts), on the real Nezha day. Every
 * span id's children must agree between the three. Rounds alternate the contenders.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Toolbox, type Dataset, type Span } from '@thinkfl/env';
import { LineChild } from './child';
import { alternate, show, spread, table } from './measure';

export interface ToolSettings {
  dataset: Dataset;
  /** Span ids timed through search_traces per round. */
  sample: number;
  /** Span ids timed through pandas and the scan per round (each reads every span). */
  pandasSample: number;
  peersPython: string;
  rounds?: number;
}

function every<T>(xs: T[], n: number, offset: number): T[] {
  const step = Math.max(1, Math.floor(xs.length / n));
  return Array.from({ length: Math.min(n, xs.length) }, (_, i) => xs[(i * step + offset) % xs.length]);
}

function timeUs(f: () => unknown): number {
  const t0 = process.hrtime.bigint();
  f();
  return Number(process.hrtime.bigint() - t0) / 1000;
}

export async function compareTools(s: ToolSettings): Promise<string> {
  const { dataset } = s;
  const spans: Span[] = [];
  for (const id of dataset.traces.traceIds()) spans.push(...dataset.traces.trace(id));
  const dir = mkdtempSync(join(tmpdir(), 'peers-tools-'));
  const csv = join(dir, 'spans.csv');
  writeFileSync(csv, `span_id,parent_id,start_us\n${spans.map((x) => `${x.span_id},${x.parent_id ?? ''},${x.start_us}`).join('\n')}\n`);
  const pandas = new LineChild('pandas', s.peersPython, [join(import.meta.dirname, 'pandas_traces.py'), csv]);
  const toolbox = new Toolbox(dataset);
  const scan = (id: string): Span[] => spans.filter((x) => x.parent_id === id).sort((a, b) => a.start_us - b.start_us);
  try {
    await pandas.next();
    for (const x of every(spans, 200, 0)) toolbox.call('search_traces', { parent_span_id: x.span_id });
    const rounds = s.rounds ?? 3;
    const samples = await alternate(['search_traces', 'pandas', 'scan'], rounds, async (name, rep) => {
      const ids = every(spans, name === 'search_traces' ? s.sample : s.pandasSample, rep + 1).map((x) => x.span_id);
      if (name === 'pandas') {
        const r = await pandas.ask<{ us: number[]; found: number[] }>(ids);
        r.found.forEach((n, i) => {
          if (n !== dataset.traces.children(ids[i]).length)
            throw new Error(`pandas and the trace store disagree on the children of ${ids[i]}`);
        });
        return r.us;
      }
      if (name === 'scan') return ids.map((id) => timeUs(() => scan(id)));
      return ids.map((id) =>
        timeUs(() => {
          if (!toolbox.call('search_traces', { parent_span_id: id }).ok) throw new Error(`search_traces failed on ${id}`);
        }),
      );
    });
    const per = (name: string) => samples.get(name)!.map((us) => spread(us).median);
    const tool = spread(per('search_traces'));
    const row = (name: string, what: string) => {
      const m = spread(per(name));
      return [name, what, show(m, 1), `${samples.get(name)![0].length} x ${rounds}`, `${(m.median / tool.median).toFixed(0)}x`];
    };
    return [
      `Tool loop: children of a span among the ${spans.length} spans of the Nezha 2023-01-29 day; per-call median of each round, median [min-max] over ${rounds} rounds after one warm-up`,
      table(
        ['contender', 'what it runs', 'µs per call', 'calls', 'time / search_traces'],
        [
          [
            'search_traces',
            'the tool: indexed children, summaries and text',
            show(tool, 1),
            `${samples.get('search_traces')![0].length} x ${rounds}`,
            '1x',
          ],
          row('pandas', "df[df.parent_id == id].sort_values('start_us') (ThinkFL's way)"),
          row('scan', 'every span read in JS, children sorted (search-traces.ts)'),
        ],
      ),
    ].join('\n');
  } finally {
    await pandas.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
