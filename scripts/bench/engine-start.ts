/**
 * Benchmark: a train engine started as a fresh Python process (`launch: 'spawn'`) against one
 * forked from an engine template (`launch: 'fork'`, templates.ts), in the same run, alternating.
 * Each engine loads a tiny model, takes one SFT step and is shut down; its CPU time is read from
 * /proc just before (the engine's own process: for a forked one, what it used since the fork). The
 * template's own start (the one import every forked engine shares) is printed apart. Prints the
 * median wall (from the driver's start to the step's answer) and CPU of each, and their ratios,
 * with the CPU model and load.
 *
 *   npx tsx scripts/bench/engine-start.ts [--rounds N]
 */
import { chmodSync, mkdtempSync, readFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { TrainEngine, type EngineLaunch } from '../../packages/trainer-ctl/src/engine';
import { TINY_CONFIG } from '../../packages/trainer-ctl/test/engine-fixtures';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '5' } } });
const TICK_MS = 10; // /proc's clock ticks (USER_HZ 100 on Linux)

function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
}

const parentOf = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[1]);

const modelDir = join(mkdtempSync(join(tmpdir(), 'engine-start-')), 'model');
// A socket directory of this run's own, so that the first fork starts a template (timed apart).
const templateDir = mkdtempSync(join(tmpdir(), 'engine-start-sockets-'));
chmodSync(templateDir, 0o700);
let templateCpuMs: number | undefined;
const ids = [
  [1, 5, 6, 7, 8, 9, 10, 2],
  [1, 5, 11, 12, 13, 2],
];

async function start(launch: EngineLaunch): Promise<{ wallMs: number; cpuMs: number }> {
  let log = '';
  const t = performance.now();
  const engine = new TrainEngine({ launch, templateDir, onStderr: (s) => (log += s) });
  await engine.request('load', { model_dir: modelDir, seed: 0, optimizer: { lr: 1e-3 } });
  await engine.request('sft_step', { input_ids: ids, mask: ids.map((r) => r.map((_, i) => (i > 0 ? 1 : 0))) });
  const wallMs = performance.now() - t;
  const pid = Number(/ready \(pid (\d+)\)/.exec(log)?.[1]);
  const forked = parentOf(pid) !== process.pid;
  if (forked !== (launch === 'fork')) throw new Error(`${launch}: the engine was ${forked ? '' : 'not '}forked\n${log.slice(-2000)}`);
  if (forked) templateCpuMs ??= cpuMs(parentOf(pid));
  const used = cpuMs(pid);
  await engine.shutdown();
  return { wallMs, cpuMs: used };
}

const setup = new TrainEngine({ launch: 'spawn' });
await setup.request('create_tiny', { out_dir: modelDir, config: TINY_CONFIG, seed: 1 });
await setup.shutdown();

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const cpuModel = readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/m)?.[1] ?? 'unknown';
const loadBefore = loadavg()[0].toFixed(2);
// The template's first engine pays its import: not a round.
const first = await start('fork');
const runs = { spawn: [] as { wallMs: number; cpuMs: number }[], fork: [] as { wallMs: number; cpuMs: number }[] };
for (let i = 0; i < Number(values.rounds); i++) {
  runs.spawn.push(await start('spawn'));
  runs.fork.push(await start('fork'));
}
const fig = (how: keyof typeof runs) => ({ wall: median(runs[how].map((r) => r.wallMs)), cpu: median(runs[how].map((r) => r.cpuMs)) });
const s = fig('spawn');
const f = fig('fork');
console.log(`CPU: ${cpuModel}; load average before ${loadBefore}, after ${loadavg()[0].toFixed(2)}`);
console.log(
  `template: ${templateCpuMs} ms CPU to start (once per user, environment and cgroup, until it idles out); its first engine ${first.wallMs.toFixed(0)} ms wall`,
);
console.log(`spawned engine: ${s.wall.toFixed(0)} ms wall, ${s.cpu.toFixed(0)} ms CPU (medians of ${runs.spawn.length})`);
console.log(`forked engine:  ${f.wall.toFixed(0)} ms wall, ${f.cpu.toFixed(0)} ms CPU (medians of ${runs.fork.length})`);
console.log(`ratio forked / spawned: wall ${(f.wall / s.wall).toFixed(2)}, CPU ${(f.cpu / s.cpu).toFixed(2)}`);
