/**
 * The fault matrix (docs/reliability.md): each of SIGKILL of the engine, of the rollout worker,
 * of the train worker, of the controller, of the embedded Redis, and SIGINT of the whole tree
 * (a terminal's Ctrl-C), at three points of one run: an SFT update, a GRPO step after its groups
 * were graded, and a policy export. A fault that stops the run is followed by `--resume`. Every
 * run must end as the unbroken run does: the same metrics lines, per-step rewards and
 * advantages, and final weights within 1e-6.
 *
 * The runs are configs/tiny-cpu.yaml with only its lengths shortened: its checkpoint retention
 * (every update, keep_last 2), train worker (autocast auto), groups, temperatures and refills
 * are the preset's; its episodes are decoded one at a time, so that runs are reproducible
 * (fault-harness.ts says why). Each fault is mid-stage, so the run resumes or restarts from a checkpoint
 * that is not a stage end, and the run goes on at least keep_last + 2 updates past the last fault
 * (retention has then deleted the checkpoint it came from). The last fault of the SIGINT row also
 * cuts the newest checkpoint's weights before the resume: the torn checkpoint is named and skipped.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readMetrics } from '../src/run-files/metrics-log';
import { readState } from '../src/run-files/state';
import { latestCheckpoint } from '../src/workers/run-files';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { readTensorboardScalars } from '../../../testkit/tensorboard';
import { ensureWarmModel } from '../../../testkit/warm-model';
import {
  compareWithUnbroken,
  FAULT_KINDS,
  leftovers,
  runWithFaults,
  shortPreset,
  writeConfig,
  type Fault,
  type FaultKind,
  type FaultOutcome,
} from './fault-harness';
import { spawnTrain, unhandledErrors } from './train-fixtures';

const RUN = 'fault-matrix';
const TIMEOUT = 1_200_000;
let scratch: string;
let configFile: string;
let keepLast: number;
const unbrokenDir = () => join(scratch, 'unbroken');
/** The updates the unbroken run made in SFT and in GRPO steps, in order. */
let sftUpdates: number[] = [];
let grpoUpdates: number[] = [];
const table: string[] = [];

beforeAll(async () => {
  await ensureNezhaDataset();
  const model = await ensureWarmModel('tiny-cpu');
  scratch = mkdtempSync(join(tmpdir(), 'fault-matrix-'));
  // Stage 3 has 4 steps, 2 more than keep_last + 2 updates after the GRPO faults need: a step whose groups all
  // scored the same makes no update, and at 2 + 2 + 2 an AMX Xeon's run skipped one and went on only 3 updates.
  const config = shortPreset('tiny-cpu', model, RUN, { sftConversations: 12, sftStepsPerUpdate: 4, steps: [2, 2, 4] });
  keepLast = (config.checkpoints as { keep_last: number }).keep_last;
  configFile = writeConfig(join(scratch, 'run.yaml'), config);
}, 1_800_000);

afterAll(() => {
  if (table.length) console.log(['fault matrix (fault: point/update -> recovery, updates after; result):', ...table].join('\n'));
  rmSync(scratch, { recursive: true, force: true });
});

/**
 * The three faults of a row: in SFT update 1 (newest checkpoint: SFT update 0's), then in the
 * second GRPO update after grading and in the export of that update (newest checkpoint: the first
 * GRPO update's, inside stage 1).
 */
function row(kind: FaultKind): Fault[] {
  return [
    { kind, point: 'sft', update: sftUpdates[1] },
    { kind, point: 'grpo-graded', update: grpoUpdates[1] },
    { kind, point: 'export', update: grpoUpdates[1] },
  ];
}

function describeOutcome(o: FaultOutcome): string {
  const stopped = `stopped (${o.exit?.signal ?? `exit ${o.exit?.code}`}${o.stopMs !== undefined ? ` in ${(o.stopMs / 1000).toFixed(1)} s` : ''})`;
  const how = o.recovery === 'stopped, resumed' ? `${stopped}, resumed` : o.recovery;
  return `${o.point}/${o.update} -> ${how}, ${o.updatesAfter} updates after`;
}

describe('fault matrix on configs/tiny-cpu.yaml (shortened)', () => {
  it(
    'unbroken run: SFT and GRPO updates enough to fault mid-stage and go on keep_last + 2 updates',
    async () => {
      const r = await spawnTrain(configFile, unbrokenDir()).exited;
      expect(r.code, r.output).toBe(0);
      const metrics = readMetrics(unbrokenDir());
      sftUpdates = metrics.filter((m) => m.kind === 'sft').map((m) => m.update as number);
      grpoUpdates = metrics.filter((m) => m.kind === 'grpo' && typeof m.update === 'number').map((m) => m.update as number);
      const total = readState(unbrokenDir())!.updates;
      console.log(`unbroken: SFT updates ${sftUpdates.join(',')}; GRPO updates ${grpoUpdates.join(',')}; ${total} in all`);
      expect(sftUpdates.length).toBeGreaterThanOrEqual(3);
      expect(total - (grpoUpdates[1] + 1)).toBeGreaterThanOrEqual(keepLast + 2);
    },
    TIMEOUT,
  );

  for (const kind of FAULT_KINDS) {
    it(
      `${kind}: at an SFT update, a graded GRPO step and a policy export, the run ends as the unbroken one`,
      async () => {
        expect(grpoUpdates.length, 'the unbroken run').toBeGreaterThanOrEqual(2);
        const runDir = join(scratch, kind);
        const torn: string[] = [];
        const run = await runWithFaults(configFile, runDir, RUN, row(kind), {
          beforeResume: (f) => {
            if (kind !== 'sigint-tree' || f.point !== 'export') return;
            // A checkpoint cut as a crash of the machine can leave it: the resume must skip it.
            const newest = latestCheckpoint(runDir)!;
            const weights = join(newest.dir, 'model.safetensors');
            truncateSync(weights, Math.floor(statSync(weights).size / 2));
            torn.push(newest.dir);
          },
        });
        expect(run.exit.code, run.output.slice(-4000)).toBe(0);
        const { weightDiff, problems } = compareWithUnbroken(runDir, unbrokenDir());
        table.push(
          `${kind}: ${run.outcomes.map(describeOutcome).join('; ')}; ${problems.length ? problems.join(' | ') : `same as unbroken (max weight diff ${weightDiff})`}`,
        );
        expect(problems).toEqual([]);
        for (const o of run.outcomes) expect(o.updatesAfter).toBeGreaterThanOrEqual(0);
        expect(run.outcomes.at(-1)!.updatesAfter).toBeGreaterThanOrEqual(keepLast + 2);
        const stops = ['rollout-worker', 'train-worker', 'controller', 'sigint-tree'].includes(kind);
        expect(run.outcomes.every((o) => o.recovery === (stops ? 'stopped, resumed' : 'went on by itself'))).toBe(true);
        if (stops && kind !== 'controller') expect(run.output).toMatch(/continue it with: trainer-ctl train .* --resume/);
        if (kind === 'engine') {
          const log = readFileSync(join(runDir, 'logs', 'train.log'), 'utf8');
          expect(log.match(/engine died during update \d+ .*restarting it from the latest checkpoint/g)).toHaveLength(3);
        }
        if (kind === 'redis') expect(run.output.match(/redis-server is back/g)!.length).toBeGreaterThanOrEqual(3);
        if (torn.length) expect(run.output).toContain(`checkpoint ${torn[0]} is torn (model.safetensors has`);
        if (kind === 'sigint-tree') {
          // Ctrl-C takes the whole tree down within seconds (the bound of the stop issue), each time.
          for (const o of run.outcomes) expect(o.stopMs).toBeLessThanOrEqual(10_000);
        }
        if (kind === 'controller') {
          // The resume after the export fault loaded a GRPO checkpoint: its KL reference came with it.
          const log = readFileSync(join(runDir, 'logs', 'train.log'), 'utf8');
          expect(log).toMatch(/engine loaded checkpoint \S+ \(\d+ updates\).*, KL reference grpo_start/);
          // Each resumed engine read the graphs an earlier engine traced (workers.train.onnx_graph_cache) instead of tracing.
          expect(log.match(/ONNX graphs for policy v\d+ read from \S+onnx-graphs/g)?.length).toBeGreaterThanOrEqual(4);
          expect(log).not.toMatch(/ONNX graphs traced/);
          // TensorBoard, reading every controller's event files, sees each step once with the kept line's value.
          const tb = readTensorboardScalars(join(runDir, 'tensorboard'));
          readMetrics(runDir).forEach((m, i) => {
            const at = (tag: string) => (tb[tag] ?? []).filter(([step]) => step === i + 1);
            const series = m.kind === 'sft' ? 'sft' : m.stage;
            const loss = (m.train as Record<string, number> | undefined)?.loss;
            if (loss === undefined) {
              // A GRPO step whose groups all scored the same makes no update: no loss, but the step is there once.
              expect(at(`${series}/train/loss`)).toEqual([]);
              const shown = at(`${series}/zero_variance_share`);
              expect(shown).toHaveLength(1);
              expect(shown[0][1]).toBeCloseTo(m.zero_variance_share as number, 5);
              return;
            }
            const points = at(`${series}/train/loss`);
            expect(points).toHaveLength(1);
            expect(points[0][1]).toBeCloseTo(loss, 5);
          });
          const again = await spawnTrain(configFile, runDir, ['--resume']).exited;
          expect(again.code).toBe(0);
          expect(again.stdout).toContain(`already complete (${readState(runDir)!.updates} updates)`);
        }
        const logs = readdirSync(join(runDir, 'logs')).map((n) => readFileSync(join(runDir, 'logs', n), 'utf8'));
        expect(unhandledErrors([run.output, ...logs].join('\n'))).toEqual([]);
        expect(leftovers(runDir)).toEqual([]);
      },
      TIMEOUT,
    );
  }
});
