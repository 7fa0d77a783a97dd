/**
 * Settings of the GRPO policy loss, shared by the engine (sent as-is over the protocol) and
 * the TypeScript reference. Keys are snake_case because the Python engine reads the same names.
 */
import { z } from 'zod';

export const LossSettingsSchema = z
  .object({
    /** Lower clip range of the importance ratio: clip(r, 1 - eps_low, .). Unitless, default 0.2 (PPO/GRPO Eq. clip). */
    eps_low: z.number().min(0).default(0.2),
    /** Upper clip range: clip(r, ., 1 + eps_high); DAPO's clip-higher raises it (e.g. 0.28). Default 0.2. */
    eps_high: z.number().min(0).default(0.2),
    /**
     * Dual clip constant c (> 1): for negative advantages the per-token loss is capped at -c*A
     * (dual-clip PPO). Unset: no dual clip.
     */
    dual_clip: z.number().gt(1).nullable().default(null),
    /** Weight beta of the KL-to-reference term added to the loss: loss = pg + beta*agg(KL). Default 0 (no KL term). */
    kl_coef: z.number().min(0).default(0),
    /**
     * Per-token KL(pi||pi_ref) estimator, d = logp - ref: k1 = d, k2 = d^2/2, k3 = exp(-d) + d - 1
     * (Schulman's estimators; GRPO uses k3). Default k3.
     */
    kl_estimator: z.enum(['k1', 'k2', 'k3']).default('k3'),
    /**
     * How per-token losses become one number: token-mean (over all generated tokens of the batch),
     * seq-mean-token-mean (mean per sequence, then over sequences; original GRPO), or
     * seq-mean-token-sum-norm (Dr.GRPO: token sum divided by B x norm_length, B the sequences
     * with at least one generated token). Default token-mean.
     */
    aggregation: z.enum(['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum-norm']).default('token-mean'),
    /**
     * token: per-token ratio exp(logp - old). sequence: GSPO's length-normalised sequence ratio
     * exp(mean over generated tokens of (logp - old)), shared by the sequence's tokens (ORACL
     * Eq. 14-15); its objective averages per sequence, so it needs aggregation
     * seq-mean-token-mean. Default token.
     */
    ratio_level: z.enum(['token', 'sequence']).default('token'),
    /** Fixed length L (tokens) that Dr.GRPO divides by; required for seq-mean-token-sum-norm. */
    norm_length: z.number().int().positive().nullable().default(null),
  })
  .strict()
  .refine((s) => s.aggregation !== 'seq-mean-token-sum-norm' || s.norm_length !== null, {
    message: 'seq-mean-token-sum-norm (Dr.GRPO) needs norm_length',
    path: ['norm_length'],
  })
  .refine((s) => s.ratio_level !== 'sequence' || s.aggregation === 'seq-mean-token-mean', {
    message: 'ratio_level sequence (GSPO) averages per sequence: it needs aggregation seq-mean-token-mean',
    path: ['ratio_level'],
  });

export type LossSettings = z.infer<typeof LossSettingsSchema>;
export type LossSettingsInput = z.input<typeof LossSettingsSchema>;
