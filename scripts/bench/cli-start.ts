/**
 * Benchmark: one `trainer-ctl` process start from its cached bundle (bin/trainer-ctl.mjs, as
 * every run's controller and worker starts) against the same sources through tsx's loader (how
 * the CLI started before the bundle), in the same run, alternating. Each process runs a command
 * (default `--help`, which loads every command's modules) and reports its own CPU time at exit.
 * Prints the median wall and CPU of each and their ratios, with the CPU model and load.
 *
 *   npx tsx scripts/bench/cli-start.ts [--rounds N] [--args "config validate configs/tiny-cpu.yaml"]
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { REPO_ROOT } from '../../testkit/nezha';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    args: { type: 'string', default: '--help' },
  },
});

const BIN = join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs');
const CLI_SOURCE = pathToFileURL(join(REPO_ROOT, 'packages', 'trainer-ctl', 'src', 'cli.ts')).href;
/** The CLI through tsx's loader, as bin/trainer-ctl.mjs ran it before the bundle. */
const THROUGH_TSX = `import { register } from 'tsx/esm/api'; register(); const { main } = await import(${JSON.stringify(CLI_SOURCE)}); await main(process.argv.slice(1));`;
/** Prints the process's CPU time (all its threads) on exit (cpu-at-exit.cjs). */
const REPORT_CPU = join(REPO_ROOT, 'scripts', 'bench', 'cpu-at-exit.cjs');
const args = values.args.split(' ').filter(Boolean);

let expected: string | undefined;

function start(how: 'bundle' | 'tsx'): { wallMs: number; cpuMs: number } {
  const argv = how === 'bundle' ? [BIN, ...args] : ['--input-type=module', '-e', THROUGH_TSX, '--', ...args];
  const t = performance.now();
  const r = spawnSync(process.execPath, ['--require', REPORT_CPU, ...argv], { cwd: REPO_ROOT, encoding: 'utf8' });
  const wallMs = performance.now() - t;
  const cpu = /cpu-us (\d+)/.exec(r.stderr);
  if (r.status !== 0 || !cpu) throw new Error(`${how}: exit ${r.status}\n${r.stderr.slice(-2000)}`);
  // Both ran the same CLI to its end: the same output.
  expected ??= r.stdout;
  if (r.stdout !== expected) throw new Error(`${how} printed something else than the first start:\n${r.stdout.slice(0, 2000)}`);
  return { wallMs, cpuMs: Number(cpu[1]) / 1000 };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const cpuModel = readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/m)?.[1] ?? 'unknown';
const loadBefore = loadavg()[0].toFixed(2);
start('bundle'); // builds the bundle if a source changed, so that the rounds time starts only
const runs = { bundle: [] as { wallMs: number; cpuMs: number }[], tsx: [] as { wallMs: number; cpuMs: number }[] };
for (let i = 0; i < Number(values.rounds); i++) {
  runs.tsx.push(start('tsx'));
  runs.bundle.push(start('bundle'));
}
const fig = (how: keyof typeof runs) => ({ wall: median(runs[how].map((r) => r.wallMs)), cpu: median(runs[how].map((r) => r.cpuMs)) });
const b = fig('bundle');
const x = fig('tsx');
console.log(`CPU: ${cpuModel}; load average before ${loadBefore}, after ${loadavg()[0].toFixed(2)}; trainer-ctl ${args.join(' ')}`);
console.log(`through tsx: ${x.wall.toFixed(0)} ms wall, ${x.cpu.toFixed(0)} ms CPU (medians of ${runs.tsx.length})`);
console.log(`bundled:     ${b.wall.toFixed(0)} ms wall, ${b.cpu.toFixed(0)} ms CPU (medians of ${runs.bundle.length})`);
console.log(`ratio bundled / tsx: wall ${(b.wall / x.wall).toFixed(2)}, CPU ${(b.cpu / x.cpu).toFixed(2)}`);
