/**
 * Stage-1 supervised fine-tuning through the train queue: the teacher samples (correct
 * teacher conversations, tokenized) are built once and kept in RUN_DIR/teacher-samples.json,
 * then fed as `epochs` seeded passes of `batch_size` conversations per optimizer step, with the
 * learning-rate schedule of sft/train.ts; one train job ('sft') carries `steps_per_update` steps.
 * SFT comes first in a run, so SFT update i is global update i; a resume skips the updates the
 * state counts.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RunConfig } from '../config/index';
import type { TrainJob, TrainResult, TrainSample } from '../queue/jobs';
import type { MetricsRecord } from './metrics-log';
import { shuffled } from './random';
import { sftLr } from '../sft/train';
import type { ControlTransport } from './transport';

export const TEACHER_FILE = 'teacher-samples.json';

export interface SftContext {
  config: RunConfig;
  runId: string;
  runDir: string;
  transport: ControlTransport;
  /** Builds the teacher samples (only conversations whose answer is correct). */
  teacher: () => Promise<TrainSample[]>;
}

export async function teacherSamples(ctx: SftContext): Promise<TrainSample[]> {
  const file = join(ctx.runDir, TEACHER_FILE);
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as TrainSample[];
  const samples = await ctx.teacher();
  if (samples.length === 0) throw new Error('SFT: the teacher produced no correct conversation on the training cases');
  writeFileSync(file, JSON.stringify(samples));
  return samples;
}

/** The batches of every SFT update, in order: epochs x ceil(n / batch_size). */
export function sftBatches(n: number, config: RunConfig): number[][] {
  const { epochs, batch_size } = config.stages.priming.sft;
  const out: number[][] = [];
  for (let e = 0; e < epochs; e++) {
    const order = shuffled(Array.from({ length: n }, (_, i) => i), `${config.run.seed}:sft:${e}`);
    for (let b = 0; b < n; b += batch_size) out.push(order.slice(b, b + batch_size));
  }
  return out;
}

export interface SftUpdateDone {
  result: TrainResult;
  record: MetricsRecord;
}

/** The optimizer steps (batches) of each SFT update, in order: steps_per_update consecutive batches each. */
export function sftUpdates(n: number, config: RunConfig): number[][][] {
  const batches = sftBatches(n, config);
  const per = config.stages.priming.sft.steps_per_update;
  const out: number[][][] = [];
  for (let b = 0; b < batches.length; b += per) out.push(batches.slice(b, b + per));
  return out;
}

/** Runs SFT updates from `done` on; `onUpdate` records each one before the next starts. */
export async function runSft(ctx: SftContext, done: number, onUpdate: (u: SftUpdateDone) => void): Promise<void> {
  const samples = await teacherSamples(ctx);
  const updates = sftUpdates(samples.length, ctx.config);
  const sft = ctx.config.stages.priming.sft;
  const schedule = { lr: sft.optimizer.lr, warmupSteps: sft.warmup_steps, minLrRatio: sft.min_lr_ratio };
  const totalSteps = updates.reduce((a, u) => a + u.length, 0);
  let stepsBefore = updates.slice(0, done).reduce((a, u) => a + u.length, 0);
  for (let u = done; u < updates.length; u++) {
    const batch = updates[u].flat().map((i) => ({ ids: samples[i].ids, mask: samples[i].mask }));
    const first = stepsBefore;
    const sftSteps = updates[u].map((b, k) => ({ size: b.length, lr: sftLr(schedule, first + k, totalSteps) }));
    stepsBefore += updates[u].length;
    const job: TrainJob = {
      runId: ctx.runId,
      stage: 'priming',
      update: u,
      kind: 'sft',
      samples: batch,
      sftSteps,
      checkpoint: u === updates.length - 1 || (u + 1) % ctx.config.checkpoints.every_steps === 0,
    };
    const t0 = Date.now();
    const result = await ctx.transport.train(job, ctx.config.workers.train.job_timeout_s * 1000);
    const tokens = batch.reduce((a, s) => a + s.mask.reduce((x, y) => x + y, 0), 0);
    onUpdate({
      result,
      record: {
        kind: 'sft',
        stage: 'priming',
        update: u,
        of: updates.length,
        epoch: Math.floor(first / Math.ceil(samples.length / sft.batch_size)),
        lr: sftSteps[sftSteps.length - 1].lr,
        samples: batch.length,
        trainedTokens: tokens,
        train: result.metrics,
        timing: { updateMs: Date.now() - t0 },
        at: new Date().toISOString(),
      },
    });
  }
}
