/**
 * The one SFT schedule (sftPlan): shuffled mini-batches per epoch, a linear warm-up then
 * cosine decay of the learning rate (the engine takes each step's lr). `trainer-ctl train`
 * sends it through the train queue (controller/sft-phase.ts); `sft` below runs the same plan
 * on an engine directly (scripts/sft-tiny.ts), with an optional wall-time budget.
 */
import { z } from 'zod';
import { Rng, type TokenizedEpisode } from '@thinkfl/rollout';
import type { TrainEngine } from '../engine/driver';

export const SftSettingsSchema = z
  .object({
    /** Passes over the samples. Default 4. */
    epochs: z.number().int().positive().default(4),
    /** Sequences per optimizer step. Default 4. */
    batchSize: z.number().int().positive().default(4),
    /** Sequences per forward/backward pass inside a step (memory bound). Default: the whole batch. */
    microBatchSize: z.number().int().positive().optional(),
    /** Peak learning rate, reached after warm-up. Default 3e-3 (a ~1M-parameter model). */
    lr: z.number().positive().default(3e-3),
    /** Floor of the cosine decay, as a fraction of lr. Default 0.1. */
    minLrRatio: z.number().min(0).max(1).default(0.1),
    /** Optimizer steps of linear warm-up from 0. Default 10. */
    warmupSteps: z.number().int().min(0).default(10),
    /** Stop after the step that crosses this many seconds of training. Default none. */
    timeBudgetS: z.number().positive().optional(),
    /** Seed of the batch order. Default 0. */
    seed: z.number().int().min(0).default(0),
  })
  .strict();
export type SftSettings = z.output<typeof SftSettingsSchema>;
export type SftSettingsInput = z.input<typeof SftSettingsSchema>;

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

/** Learning rate of step `step` of `total`. */
export function sftLr(s: Pick<SftSettings, 'lr' | 'warmupSteps' | 'minLrRatio'>, step: number, total: number): number {
  if (step < s.warmupSteps) return (s.lr * (step + 1)) / (s.warmupSteps + 1);
  const t = total <= s.warmupSteps + 1 ? 1 : (step - s.warmupSteps) / (total - s.warmupSteps - 1);
  return s.lr * (s.minLrRatio + (1 - s.minLrRatio) * 0.5 * (1 + Math.cos(Math.PI * Math.min(1, t))));
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

/** Every SFT optimizer step, in order: `epochs` seeded shuffles of n samples cut into batches of batchSize. */
export function sftPlan(n: number, input: SftSettingsInput = {}): SftStep[] {
  const s = SftSettingsSchema.parse(input);
  const total = Math.ceil(n / s.batchSize) * s.epochs;
  const rng = new Rng(s.seed);
  const steps: SftStep[] = [];
  for (let epoch = 0; epoch < s.epochs; epoch++) {
    const idx = order(n, rng);
    for (let b = 0; b < n; b += s.batchSize) steps.push({ batch: idx.slice(b, b + s.batchSize), lr: sftLr(s, steps.length, total), epoch });
  }
  return steps;
}

/** Trains the engine's loaded model on sftPlan's steps; onStep sees each step's loss. */
export async function sft(
  engine: TrainEngine,
  samples: readonly TokenizedEpisode[],
  input: SftSettingsInput = {},
  onStep?: (step: number, total: number, loss: number) => void,
): Promise<SftReport> {
  const s = SftSettingsSchema.parse(input);
  if (samples.length === 0) throw new Error('sft: no samples to train on');
  const plan = sftPlan(samples.length, s);
  const started = Date.now();
  const report: SftReport = { steps: 0, epochs: 0, epochLoss: [], tokens: 0, wallMs: 0 };
  const losses: number[][] = [];
  for (const step of plan) {
    const batch = step.batch.map((i) => samples[i]);
    const r = await engine.request('sft_step', {
      input_ids: batch.map((x) => x.ids),
      mask: batch.map((x) => x.mask),
      lr: step.lr,
      ...(s.microBatchSize !== undefined && { micro_batch_size: s.microBatchSize }),
    });
    report.steps++;
    report.tokens += r.tokens;
    (losses[step.epoch] ??= []).push(r.loss);
    onStep?.(report.steps, plan.length, r.loss);
    if (s.timeBudgetS !== undefined && Date.now() - started >= s.timeBudgetS * 1000) break;
  }
  report.epochs = losses.length;
  report.epochLoss = losses.map((l) => l.reduce((a, b) => a + b, 0) / l.length);
  report.wallMs = Date.now() - started;
  return report;
}
