/**
 * Benchmark: an SFT optimizer step of the main job through its real path against the engine's step
 * alone, in the same run. Real path: the steps of a train job as the train worker runs them (the
 * train queue's token-batch file, engineStep, the engine over stdio as the supervisor loads it,
 * time per step seen by Node). Alone: Trainer.sft_step in a Python process of its own
 * (scripts/bench/sft-step-alone.py) on the same steps, timed inside Python. Both train the same
 * steps of the same plan from the same weights, so their losses must agree (printed). Blocks of
 * steps alternate between the two (the first block warms up); prints the CPU model, the load
 * average, the medians per step and their ratio, and the median of each part of the step alone (its
 * forward, backward, gradient clipping, AdamW, the rest; the request's check and step-file read).
 *
 * --save DIR writes the real path's weights after all its steps (the engine's `weights` export), to
 * compare two commits' training (same plan, same steps).
 *
 *   npx tsx scripts/bench/sft-step-path.ts --samples RUN_DIR/teacher-samples.json [--config configs/tiny-cpu.yaml] [--steps 20] [--blocks 6] [--save DIR]
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { loadRunConfig } from '../../packages/trainer-ctl/src/config/index';
import { sftUpdates } from '../../packages/trainer-ctl/src/controller/sft-phase';
import { ENGINE_PYTHON } from '../../packages/trainer-ctl/src/engine/driver';
import type { SftStepArgs } from '../../packages/trainer-ctl/src/engine/protocol';
import type { TrainJob, TrainSample } from '../../packages/trainer-ctl/src/queue/jobs';
import { writeTokenBatch } from '../../packages/trainer-ctl/src/queue/step-file';
import { stepFilePath } from '../../packages/trainer-ctl/src/queue/train-queue';
import { EngineSupervisor, engineLoadArgs } from '../../packages/trainer-ctl/src/workers/engine-supervisor';
import { dataDir } from '../../packages/trainer-ctl/src/workers/run-files';
import { engineStep, mergeSteps } from '../../packages/trainer-ctl/src/workers/train-step';
import { REPO_ROOT } from '../../testkit/nezha';

const { values } = parseArgs({
  options: {
    /** A run's teacher conversations (RUN_DIR/teacher-samples.json of `trainer-ctl train`). */
    samples: { type: 'string' },
    config: { type: 'string', default: join(REPO_ROOT, 'configs', 'tiny-cpu.yaml') },
    /** SFT optimizer steps per block (one train job each). */
    steps: { type: 'string', default: '20' },
    /** Blocks per path; the first of each is a warm-up. */
    blocks: { type: 'string', default: '6' },
    /** Where to write the real path's weights after its last step. */
    save: { type: 'string' },
  },
});
if (!values.samples) throw new Error('--samples RUN_DIR/teacher-samples.json is required');
const perBlock = Number(values.steps);
const blocks = Number(values.blocks);
const config = loadRunConfig(values.config!).config;
const samples = JSON.parse(readFileSync(values.samples, 'utf8')) as TrainSample[];
const plan = sftUpdates(samples.length, config).flat();
if (plan.length < perBlock * blocks) throw new Error(`the plan has ${plan.length} steps, fewer than ${blocks} x ${perBlock}`);

const cpuModel = readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/m)?.[1] ?? 'unknown';
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** Block b's train job as the train queue hands it to the worker: its rows in a token-batch file. */
function job(runDir: string, b: number): TrainJob {
  const steps = plan.slice(b * perBlock, (b + 1) * perBlock);
  const rows = steps.flatMap((s) => s.batch).map((i) => samples[i]);
  const batch = writeTokenBatch(stepFilePath(dataDir(runDir), b), {
    count: rows.length,
    row: (i) => ({ ids: rows[i].ids, mask: rows[i].mask }),
  });
  return {
    run_id: 'bench',
    stage: 'priming',
    update: b,
    kind: 'sft',
    samples: [],
    batch,
    sft_steps: steps.map((s) => ({ size: s.batch.length, lr: s.lr })),
    checkpoint: false,
    export: false,
  };
}

/** Trainer.sft_step in a process of its own: one JSON line in, {ms, loss} out. */
function alone() {
  const child = spawn(ENGINE_PYTHON, [join(REPO_ROOT, 'scripts', 'bench', 'sft-step-alone.py')], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { OMP_WAIT_POLICY: 'PASSIVE', ...process.env },
  });
  const lines = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
  const ask = async (msg: unknown) => {
    child.stdin!.write(`${JSON.stringify(msg)}\n`);
    const next = await lines.next();
    if (next.done) throw new Error('sft-step-alone.py exited');
    return JSON.parse(next.value) as { ms: number; loss: number; parts: Record<string, number> };
  };
  return { ask, close: () => child.stdin!.end() };
}

const runDir = mkdtempSync(join(tmpdir(), 'bench-sft-path-'));
const supervisor = new EngineSupervisor({ config, runDir });
const helper = alone();
try {
  const loadBefore = load();
  await supervisor.open(undefined);
  await helper.ask(engineLoadArgs(config, undefined));
  const ms = { real: [] as number[], alone: [] as number[] };
  const loss = { real: [] as number[], alone: [] as number[] };
  const parts = new Map<string, number[]>();
  let nodeMs = 0;
  for (let b = 0; b < blocks; b++) {
    const j = job(runDir, b);
    const t0 = performance.now();
    const s = engineStep(j, config);
    nodeMs += performance.now() - t0;
    const args = s.args as SftStepArgs[];
    const real = async () => {
      const parts = [];
      for (const a of args) {
        const t = performance.now();
        parts.push(await supervisor.engine.request('sft_step', a));
        if (b > 0) ms.real.push(performance.now() - t);
      }
      loss.real.push(...parts.map((p) => p.loss));
      mergeSteps(parts);
    };
    const inProcess = async () => {
      for (const a of args) {
        const r = await helper.ask(a);
        if (b > 0) {
          ms.alone.push(r.ms);
          const inStep = Object.entries(r.parts).filter(([k]) => !k.startsWith('request'));
          const rest = r.ms - inStep.reduce((x, [, v]) => x + v, 0);
          for (const [k, v] of [...Object.entries(r.parts), ['rest of Trainer.sft_step', rest] as const])
            parts.set(k, [...(parts.get(k) ?? []), v]);
        }
        loss.alone.push(r.loss);
      }
    };
    // Alternating which goes first, so that a change of load hits both alike.
    for (const f of b % 2 ? [inProcess, real] : [real, inProcess]) await f();
  }
  const diff = Math.max(...loss.real.map((l, i) => Math.abs(l - loss.alone[i])));
  const [r, a] = [median(ms.real), median(ms.alone)];
  console.log(`CPU: ${cpuModel}; load average before ${loadBefore}, after ${load()}`);
  console.log(
    `${values.config}: ${blocks - 1} timed blocks of ${perBlock} SFT steps per path (batch ${config.stages.priming.sft.batch_size}), ` +
      `first block warm-up; max |loss real - loss alone| over ${loss.real.length} steps: ${diff.toExponential(2)}`,
  );
  console.log(`${'path'.padEnd(44)} ${'median ms/step'.padStart(14)} ${'min'.padStart(7)} ${'vs alone'.padStart(9)}`);
  for (const [name, xs, m] of [
    ['engine step alone (Trainer.sft_step in-process)', ms.alone, a],
    ['real path (step file, stdio, engine protocol)', ms.real, r],
  ] as const) {
    console.log(
      `${name.padEnd(44)} ${m.toFixed(1).padStart(14)} ${Math.min(...xs)
        .toFixed(1)
        .padStart(7)} ${(m / a).toFixed(2).padStart(8)}x`,
    );
  }
  console.log(`real - alone: ${(r - a).toFixed(1)} ms a step; engineStep (Node) ${(nodeMs / blocks / perBlock).toFixed(2)} ms a step`);
  console.log('parts of the step alone (median ms over its steps; the request lines are outside its timer):');
  for (const [k, xs] of parts) console.log(`  ${k.padEnd(42)} ${median(xs).toFixed(2).padStart(8)}`);
  if (values.save) {
    await supervisor.engine.request('export', { dir: values.save, format: 'weights' });
    console.log(`weights after ${loss.real.length} steps: ${values.save}`);
  }
} finally {
  helper.close();
  await supervisor.shutdown();
  rmSync(runDir, { recursive: true, force: true });
}
