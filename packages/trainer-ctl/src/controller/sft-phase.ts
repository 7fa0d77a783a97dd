/**
 * Stage-1 supervised fine-tuning through the train queue: the teacher samples (correct
 * teacher conversations, tokenized) are built once and kept in RUN_DIR/teacher-samples.json,
 * then fed as the steps of algo/sft/schedule.ts's sftPlan (the one SFT schedule, also run by
 * scripts/sft-tiny.ts); one train job ('sft') carries `steps_per_update` steps.
 * SFT comes first in a run, so SFT update i is global update i; a resume skips the updates the
 * state counts.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RunConfig } from '../config/index';
import type { TrainJob, TrainResult, TrainSample } from '../queue/jobs';
import type { MetricsRecord } from '../run-files/metrics-log';
import { sftPlan, type SftStep } from '../algo/sft/schedule';
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

export interface SftUpdateDone {
  result: TrainResult;
  record: MetricsRecord;
}

/** The optimizer steps of each SFT update, in order: steps_per_update consecutive steps of sftPlan each. */
export function sftUpdates(n: number, config: RunConfig): SftStep[][] {
  const sft = config.stages.priming.sft;
  const plan = sftPlan(n, sft, { lr: sft.optimizer.lr, seed: config.run.seed });
  const out: SftStep[][] = [];
  for (let b = 0; b < plan.length; b += sft.steps_per_update) out.push(plan.slice(b, b + sft.steps_per_update));
  return out;
}

/** Runs SFT updates from `done` on; `onUpdate` records each one before the next starts. */
export async function runSft(ctx: SftContext, done: number, onUpdate: (u: SftUpdateDone) => void | Promise<void>): Promise<void> {
  const samples = await teacherSamples(ctx);
  const updates = sftUpdates(samples.length, ctx.config);
  for (let u = done; u < updates.length; u++) {
    const batch = updates[u].flatMap((step) => step.batch).map((i) => ({ ids: samples[i].ids, mask: samples[i].mask }));
    const sftSteps = updates[u].map((step) => ({ size: step.batch.length, lr: step.lr }));
    const job: TrainJob = {
      run_id: ctx.runId,
      stage: 'priming',
      update: u,
      kind: 'sft',
      samples: batch,
      sft_steps: sftSteps,
      checkpoint: u === updates.length - 1 || (u + 1) % ctx.config.checkpoints.every_steps === 0,
      // Only SFT's last policy is played (the first evaluation and GRPO step); a resume publishes its checkpoint's.
      export: u === updates.length - 1,
    };
    const t0 = Date.now();
    const result = await ctx.transport.train(job, ctx.config.workers.train.job_timeout_s * 1000);
    const tokens = batch.reduce((a, s) => a + s.mask.reduce((x, y) => x + y, 0), 0);
    await onUpdate({
      result,
      record: {
        kind: 'sft',
        stage: 'priming',
        update: u,
        of: updates.length,
        epoch: updates[u][0].epoch,
        lr: sftSteps[sftSteps.length - 1].lr,
        samples: batch.length,
        trained_tokens: tokens,
        train: result.metrics,
        timing: { update_ms: Date.now() - t0 },
        at: new Date().toISOString(),
      },
    });
  }
}
