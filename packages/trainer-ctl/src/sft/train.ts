/**
 * Supervised fine-tuning on tokenized conversations with the train engine: shuffled
 * mini-batches per epoch, a linear warm-up then cosine decay of the learning rate (the
 * engine takes each step's lr), and an optional wall-time budget.
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

/** Trains the engine's loaded model; onStep sees each step's loss. */
export async function sft(
  engine: TrainEngine,
  samples: readonly TokenizedEpisode[],
  input: SftSettingsInput = {},
  onStep?: (step: number, total: number, loss: number) => void,
): Promise<SftReport> {
  const s = SftSettingsSchema.parse(input);
  if (samples.length === 0) throw new Error('sft: no samples to train on');
  const perEpoch = Math.ceil(samples.length / s.batchSize);
  const total = perEpoch * s.epochs;
  const rng = new Rng(s.seed);
  const started = Date.now();
  const report: SftReport = { steps: 0, epochs: 0, epochLoss: [], tokens: 0, wallMs: 0 };
  for (let epoch = 0; epoch < s.epochs; epoch++) {
    report.epochs++;
    const idx = order(samples.length, rng);
    let sum = 0;
    let n = 0;
    for (let b = 0; b < idx.length; b += s.batchSize) {
      const batch = idx.slice(b, b + s.batchSize).map((i) => samples[i]);
      const r = await engine.request('sft_step', {
        input_ids: batch.map((x) => x.ids),
        mask: batch.map((x) => x.mask),
        lr: sftLr(s, report.steps, total),
        ...(s.microBatchSize !== undefined && { micro_batch_size: s.microBatchSize }),
      });
      report.steps++;
      report.tokens += r.tokens;
      sum += r.loss;
      n++;
      onStep?.(report.steps, total, r.loss);
      if (s.timeBudgetS !== undefined && Date.now() - started >= s.timeBudgetS * 1000) break;
    }
    report.epochLoss.push(sum / n);
    if (s.timeBudgetS !== undefined && Date.now() - started >= s.timeBudgetS * 1000) break;
  }
  report.wallMs = Date.now() - started;
  return report;
}
