/**
 * The one SFT schedule (sftPlan): shuffled mini-batches per epoch, a linear warm-up then
 * cosine decay of the learning rate (the engine takes each step's lr). `trainer-ctl train`
 * sends it through the train queue (controller/sft-phase.ts); `sft` below runs the same plan
 * on an engine directly (scripts/sft-tiny.ts), with an optional wall-time budget.
 */
import { z } from 'zod';
import { Rng } from '@thinkfl/env';
import type { TokenizedEpisode } from '@thinkfl/rollout';
import type { TrainEngine } from '../../engine/driver';

/** The SFT schedule: the one schema of SFT settings, also the schedule keys of the run config's stages.priming.sft. */
export const SftSettingsSchema = z.strictObject({
  /** Passes over the samples. Default 2. */
  epochs: z.number().int().positive().default(2).describe('Passes over the teacher conversations. Default 2.'),
  /** Sequences per optimizer step. Default 8. */
  batch_size: z.number().int().positive().default(8).describe('Conversations per SFT optimizer step. Default 8.'),
  /** Optimizer steps of linear warm-up from 0 to the peak learning rate. Default 0. */
  warmup_steps: z
    .number()
    .int()
    .min(0)
    .default(0)
    .describe('SFT optimizer steps of linear learning-rate warm-up from 0 to optimizer.lr. Default 0 (none).'),
  /** Floor of the cosine decay after warm-up, as a fraction of the peak learning rate. Default 1 (constant). */
  min_lr_ratio: z
    .number()
    .min(0)
    .max(1)
    .default(1)
    .describe(
      'Floor of a cosine decay of the SFT learning rate after warm-up, as a fraction of optimizer.lr, reached ' +
        'at the last update. Default 1 (constant learning rate).',
    ),
});
export type SftSettings = z.output<typeof SftSettingsSchema>;
export type SftSettingsInput = z.input<typeof SftSettingsSchema>;

/** What a schedule needs besides its settings: the peak learning rate and the seed of the batch order. */
export interface SftPlanOptions {
  lr: number;
  /** Default 0. */
  seed?: number;
}

/** Options of `sft`, which runs the plan on an engine directly. */
export interface SftRunOptions extends SftPlanOptions {
  /** Sequences per forward/backward pass inside a step (memory bound). Default: the whole batch. */
  microBatchSize?: number;
  /** Stop after the step that crosses this many seconds of training. Default none. */
  timeBudgetS?: number;
}

export interface SftReport {
  steps: number;
  /** Epochs begun (the last may be cut by the time budget). */
  epochs: number;
  /** Mean loss of each epoch's steps. */
  epochLoss: number[];
  /** Trained tokens seen. */
  tokens: number;
  wallMs: number;
}

/** Learning rate of step `step` of `total`, peaking at `lr`. */
export function sftLr(s: Pick<SftSettings, 'warmup_steps' | 'min_lr_ratio'>, lr: number, step: number, total: number): number {
  if (step < s.warmup_steps) return (lr * (step + 1)) / (s.warmup_steps + 1);
  const t = total <= s.warmup_steps + 1 ? 1 : (step - s.warmup_steps) / (total - s.warmup_steps - 1);
  return lr * (s.min_lr_ratio + (1 - s.min_lr_ratio) * 0.5 * (1 + Math.cos(Math.PI * Math.min(1, t))));
}

function order(n: number, rng: Rng): number[] {
  const idx = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rng.next() * (i + 1));
    [idx[i], idx[j]] = [idx[j], idx[i]];
  }
  return idx;
}

/** One optimizer step of SFT. */
export interface SftStep {
  /** Indices of the samples of this step's batch. */
  batch: number[];
  lr: number;
  epoch: number;
}

/** Every SFT optimizer step, in order: `epochs` seeded shuffles of n samples cut into batches of batch_size. */
export function sftPlan(n: number, s: SftSettings, opts: SftPlanOptions): SftStep[] {
  const total = Math.ceil(n / s.batch_size) * s.epochs;
  const rng = new Rng(opts.seed ?? 0);
  const steps: SftStep[] = [];
  for (let epoch = 0; epoch < s.epochs; epoch++) {
    const idx = order(n, rng);
    for (let b = 0; b < n; b += s.batch_size) {
      steps.push({ batch: idx.slice(b, b + s.batch_size), lr: sftLr(s, opts.lr, steps.length, total), epoch });
    }
  }
  return steps;
}

/** Trains the engine's loaded model on sftPlan's steps; onStep sees each step's loss. */
export async function sft(
  engine: TrainEngine,
  samples: readonly TokenizedEpisode[],
  input: SftSettingsInput,
  opts: SftRunOptions,
  onStep?: (step: number, total: number, loss: number) => void,
): Promise<SftReport> {
  if (samples.length === 0) throw new Error('sft: no samples to train on');
  const plan = sftPlan(samples.length, SftSettingsSchema.parse(input), opts);
  const started = Date.now();
  const report: SftReport = { steps: 0, epochs: 0, epochLoss: [], tokens: 0, wallMs: 0 };
  const losses: number[][] = [];
  for (const step of plan) {
    const batch = step.batch.map((i) => samples[i]);
    const r = await engine.request('sft_step', {
      input_ids: batch.map((x) => x.ids),
      mask: batch.map((x) => x.mask),
      lr: step.lr,
      ...(opts.microBatchSize !== undefined && { micro_batch_size: opts.microBatchSize }),
    });
    report.steps++;
    report.tokens += r.tokens;
    (losses[step.epoch] ??= []).push(r.loss);
    onStep?.(report.steps, plan.length, r.loss);
    if (opts.timeBudgetS !== undefined && Date.now() - started >= opts.timeBudgetS * 1000) break;
  }
  report.epochs = losses.length;
  report.epochLoss = losses.map((l) => l.reduce((a, b) => a + b, 0) / l.length);
  report.wallMs = Date.now() - started;
  return report;
}
