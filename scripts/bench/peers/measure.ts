/** What every peers table shares: the machine and its load, alternating repetitions, median and spread, the table. */
import { execFileSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';

export interface Machine {
  model: string;
  cores: number;
  /** Native bf16 instructions (avx512_bf16, amx_bf16), from the CPU flags. */
  bf16: string[];
}

export function machine(): Machine {
  let model = cpus()[0]?.model ?? 'unknown';
  let flags = '';
  try {
    const lscpu = execFileSync('lscpu', { encoding: 'utf8' });
    model = /^Model name:\s*(.+)$/m.exec(lscpu)?.[1].trim() ?? model;
    flags = /^Flags:\s*(.+)$/m.exec(lscpu)?.[1] ?? '';
  } catch {
    // lscpu is missing on some images: node's CPU model stands in, the flags stay unknown.
  }
  return { model, cores: cpus().length, bf16: flags.split(/\s+/).filter((f) => f === 'avx512_bf16' || f === 'amx_bf16') };
}

export const machineLine = (m: Machine) =>
  `machine: ${m.model}, ${m.cores} cores, native bf16: ${m.bf16.length ? m.bf16.join(' + ') : 'no'}`;

/** The 1/5/15-minute load averages, for the table it is measured with. */
export const loadLine = () =>
  `load average ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`;

export interface Spread {
  median: number;
  min: number;
  max: number;
  n: number;
}

export function spread(xs: number[]): Spread {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return { median: s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2, min: s[0], max: s[s.length - 1], n: s.length };
}

/** "median [min-max]" with `digits` decimals. */
export const show = (s: Spread, digits = 2) => `${s.median.toFixed(digits)} [${s.min.toFixed(digits)}-${s.max.toFixed(digits)}]`;

/**
 * Runs each contender's repetition in turn, `reps` rounds (the contenders' order rotates each
 * round so none always runs first after the other's heat), after one warm-up round that is not
 * kept. Returns the kept samples per contender.
 */
export async function alternate<T>(
  names: readonly string[],
  reps: number,
  once: (name: string, rep: number) => Promise<T>,
): Promise<Map<string, T[]>> {
  const out = new Map(names.map((n) => [n, [] as T[]]));
  for (let rep = -1; rep < reps; rep++) {
    const k = Math.max(rep, 0) % names.length;
    for (const name of [...names.slice(k), ...names.slice(0, k)]) {
      const sample = await once(name, rep);
      if (rep >= 0) out.get(name)!.push(sample);
    }
  }
  return out;
}

/** A plain-text table: a header row, then rows, columns padded to their widest cell. */
export function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.map(line)].join('\n');
}
