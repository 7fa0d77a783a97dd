/**
 * Faults on the other CPU presets' own settings: configs/ci-smoke.yaml (a checkpoint every 2
 * updates, keep_last 1, micro-batches of 4, groups of 4 x 2, no refills), configs/cpu-learn.yaml
 * (groups of 8 x 4, drgrpo advantages, span answers and verdicts) and configs/tiny-cpu.yaml with
 * a LoRA adapter. Only their lengths are shortened (fault-harness.ts). Each run takes two faults:
 * the engine SIGKILLed in the last SFT update (the train worker restarts it from a mid-SFT
 * checkpoint), then Ctrl-C in a GRPO step whose newest checkpoint is mid-stage, and `--resume`.
 * The run must go on keep_last + 2 updates past the second fault and end as the unbroken run,
 * with the same run.expect verdicts (the preset's gate is kept on the shortened run).
 * (configs/tiny-cpu.yaml's own settings are the fault matrix's: fault-matrix.test.ts.)
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readMetrics } from '../src/run-files/metrics-log';
import { readState } from '../src/run-files/state';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { ensureWarmModel } from '../../../testkit/warm-model';
import { compareWithUnbroken, leftovers, runWithFaults, shortPreset, writeConfig, type Fault } from './fault-harness';
import { spawnTrain } from './train-fixtures';

const TIMEOUT = 1_200_000;
let scratch: string;
let model: string;

beforeAll(async () => {
  await ensureNezhaDataset();
  // The tiny-cpu tiny model after its SFT: every CPU preset creates this architecture.
  model = await ensureWarmModel('tiny-cpu');
  scratch = mkdtempSync(join(tmpdir(), 'fault-presets-'));
}, 1_800_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const CASES: { name: string; preset: string; steps: [number, number, number]; extra?: Record<string, unknown> }[] = [
  // Priming long enough for a checkpoint inside it (every 2 updates) that is not its end. Each has one
  // GRPO step more than keep_last + 2 updates after the fault need: a step whose groups all scored
  // the same makes no update, and which steps do depends on the CPU's rounding (an AMX Xeon skipped
  // one where the Zen 4 EPYC did not, leaving these runs at exactly keep_last + 2).
  { name: 'ci-smoke', preset: 'ci-smoke', steps: [4, 1, 2] },
  { name: 'cpu-learn', preset: 'cpu-learn', steps: [2, 2, 3] },
  { name: 'tiny-cpu with LoRA', preset: 'tiny-cpu', steps: [2, 2, 3], extra: { model: { lora: { r: 8, alpha: 16 } } } },
];

/** The run.expect verdicts a run wrote (junit.xml without its timestamp), or null when it has none. */
function gateVerdicts(runDir: string): string | null {
  const file = join(runDir, 'junit.xml');
  return existsSync(file) ? readFileSync(file, 'utf8').replace(/ timestamp="[^"]*"/, '') : null;
}

/** Updates of the unbroken run that had a checkpoint (their controller state snapshots), and those that ended a stage. */
function checkpointed(runDir: string): { all: number[]; stageEnds: Set<number> } {
  const all = readdirSync(join(runDir, 'states'))
    .map((f) => Number(/^update-(\d+)\.json$/.exec(f)![1]))
    .sort((a, b) => a - b);
  const ends = Object.values(readState(runDir)!.stage_checkpoints ?? {}).map((d) => Number(/update-(\d+)$/.exec(d)![1]));
  return { all, stageEnds: new Set(ends) };
}

describe.each(CASES)('faults on $name', ({ name, preset, steps, extra }) => {
  const id = name.replace(/\W+/g, '-');
  const dir = () => join(scratch, id);
  let configFile: string;
  let keepLast: number;
  let faults: Fault[] = [];
  let unbrokenCode: number | null = null;

  it(
    'unbroken run',
    async () => {
      const config = shortPreset(preset, model, id, { sftConversations: 12, sftStepsPerUpdate: 4, steps }, extra);
      keepLast = (config.checkpoints as { keep_last: number }).keep_last;
      configFile = writeConfig(join(scratch, `${id}.yaml`), config);
      const r = await spawnTrain(configFile, join(dir(), 'unbroken')).exited;
      // The preset's run.expect is kept; its thresholds are set for the full lengths, so the shortened
      // run may end with a failed expectation (exit 2). The faulted run must then reach the same verdicts.
      unbrokenCode = r.code;
      if (r.code !== 0) expect(r.output, r.output.slice(-3000)).toMatch(/run\.expect: \d+ of \d+ expectations failed/);
      expect([0, 2], r.output.slice(-3000)).toContain(r.code);
      const metrics = readMetrics(join(dir(), 'unbroken'));
      const sft = metrics.filter((m) => m.kind === 'sft').map((m) => m.update as number);
      const grpo = metrics.filter((m) => m.kind === 'grpo' && typeof m.update === 'number').map((m) => m.update as number);
      const { all, stageEnds } = checkpointed(join(dir(), 'unbroken'));
      // The engine restarts from the newest checkpoint before the last SFT update: it must not be a stage end.
      const sftFault = sft.at(-1)!;
      expect(all.filter((c) => c <= sftFault).at(-1)).toBeGreaterThan(0);
      // Ctrl-C in the first GRPO update whose newest checkpoint is inside a GRPO stage.
      const grpoFault = grpo.find((u) => {
        const from = all.filter((c) => c <= u).at(-1)!;
        return from > sft.length && !stageEnds.has(from);
      });
      expect(grpoFault, `GRPO updates ${grpo}, checkpoints ${all}, stage ends ${[...stageEnds]}`).toBeDefined();
      faults = [
        { kind: 'engine', point: 'sft', update: sftFault },
        { kind: 'sigint-tree', point: 'grpo-graded', update: grpoFault! },
      ];
      const total = readState(join(dir(), 'unbroken'))!.updates;
      console.log(
        `${name}: SFT updates ${sft}; GRPO updates ${grpo}; checkpoints after ${all}; faults at ${faults.map((f) => `${f.kind}@${f.update}`)}; ${total} updates`,
      );
      expect(total - (grpoFault! + 1)).toBeGreaterThanOrEqual(keepLast + 2);
    },
    TIMEOUT,
  );

  it(
    'engine SIGKILL mid-SFT and Ctrl-C mid-stage end as the unbroken run',
    async () => {
      expect(faults, 'the unbroken run').toHaveLength(2);
      const runDir = join(dir(), 'faulted');
      const run = await runWithFaults(configFile, runDir, id, faults);
      expect(run.exit.code, run.output.slice(-4000)).toBe(unbrokenCode);
      expect(gateVerdicts(runDir)).toEqual(gateVerdicts(join(dir(), 'unbroken')));
      expect(run.outcomes.map((o) => o.recovery)).toEqual(['went on by itself', 'stopped, resumed']);
      const { weightDiff, problems } = compareWithUnbroken(runDir, join(dir(), 'unbroken'));
      console.log(
        `${name}: ${problems.length ? problems.join(' | ') : 'same as unbroken'}; max abs weight difference ${weightDiff}; updates after the last fault ${run.outcomes[1].updatesAfter}`,
      );
      expect(problems).toEqual([]);
      expect(run.outcomes[1].updatesAfter).toBeGreaterThanOrEqual(keepLast + 2);
      // Retention went on deleting: what is left is keep_last, the stage ends (SFT and three stages) and the engine's origin.
      const left = readdirSync(join(runDir, 'checkpoints')).filter((n) => /^update-\d+$/.test(n));
      expect(left.length).toBeLessThanOrEqual(keepLast + 4 + 1);
      expect(leftovers(runDir)).toEqual([]);
    },
    TIMEOUT,
  );
});
