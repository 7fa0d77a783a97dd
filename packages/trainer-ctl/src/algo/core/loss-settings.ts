/**
 * Settings of the GRPO policy loss, sent as-is to the engine, whose grpo_loss.py is the one
 * implementation of the loss. Keys are snake_case because the Python engine reads the same names.
 */
import { z } from 'zod';

const base = z
  .object({
    /** Lower clip range of the importance ratio: clip(r, 1 - eps_low, .). Unitless, default 0.2 (PPO/GRPO Eq. clip). */
    eps_low: z
      .number()
      .min(0)
      .default(0.2)
      .describe(
        'Lower clip range of the importance ratio r: clip(r, 1 - eps_low, .) (PPO clip, DeepSeekMath GRPO Eq. 3; TRL GRPOConfig epsilon). Unitless. Default 0.2.',
      ),
    /** Upper clip range: clip(r, ., 1 + eps_high); DAPO's clip-higher raises it (e.g. 0.28). Default 0.2. */
    eps_high: z
      .number()
      .min(0)
      .default(0.2)
      .describe(
        "Upper clip range: clip(r, ., 1 + eps_high); DAPO's clip-higher raises it, e.g. 0.28 (TRL GRPOConfig epsilon_high). Unitless. Default 0.2.",
      ),
    /**
     * Dual clip constant c (> 1): for negative advantages the per-token loss is capped at -c*A
     * (dual-clip PPO). Unset: no dual clip.
     */
    dual_clip: z
      .number()
      .gt(1)
      .nullable()
      .default(null)
      .describe(
        'Dual-clip constant c (> 1): for a negative advantage A the per-token loss is capped at -c*A (dual-clip PPO, Ye et al. 2020, arXiv 1912.09729). Default null (no dual clip).',
      ),
    /** Weight beta of the KL-to-reference term added to the loss: loss = pg + beta*agg(KL). Default 0 (no KL term). */
    kl_coef: z
      .number()
      .min(0)
      .default(0)
      .describe(
        'Weight beta of the KL-to-reference term: loss = pg + beta*agg(KL) (DeepSeekMath GRPO Eq. 3; TRL GRPOConfig beta). The reference is grpo.reference. Default 0 (no KL term, no reference taken).',
      ),
    /**
     * Per-token KL(pi||pi_ref) estimator, d = logp - ref: k1 = d, k2 = d^2/2, k3 = exp(-d) + d - 1
     * (Schulman's estimators; GRPO uses k3). Default k3.
     */
    kl_estimator: z
      .enum(['k1', 'k2', 'k3'])
      .default('k3')
      .describe(
        "Per-token estimator of KL(pi || pi_ref), d = logp - ref: k1 = d, k2 = d^2/2, k3 = exp(-d) + d - 1 (Schulman's estimators; DeepSeekMath GRPO Eq. 4 uses k3, as TRL does). Default k3.",
      ),
    /**
     * How per-token losses become one number: token-mean (over all generated tokens of the batch),
     * seq-mean-token-mean (mean per sequence, then over sequences; original GRPO), or
     * seq-mean-token-sum-norm (Dr.GRPO: token sum divided by B x norm_length, B the sequences
     * with at least one generated token). Default token-mean.
     */
    aggregation: z
      .enum(['token-mean', 'seq-mean-token-mean', 'seq-mean-token-sum-norm'])
      .default('token-mean')
      .describe(
        'How per-token losses become one number. token-mean: over all generated tokens of the batch (DAPO; TRL loss_type dapo). ' +
          'seq-mean-token-mean: mean per sequence, then over sequences (original GRPO; TRL grpo). seq-mean-token-sum-norm: ' +
          'token sum divided by B x norm_length, B the sequences with a generated token (Dr.GRPO; TRL dr_grpo). Default token-mean.',
      ),
    /**
     * token: per-token ratio exp(logp - old). sequence: GSPO's length-normalised sequence ratio
     * exp(mean over generated tokens of (logp - old)), shared by the sequence's tokens (ORACL
     * Eq. 14-15); its objective averages per sequence, so it needs aggregation
     * seq-mean-token-mean. Default token.
     */
    ratio_level: z
      .enum(['token', 'sequence'])
      .default('token')
      .describe(
        "token: per-token ratio exp(logp - old). sequence: GSPO's length-normalised sequence ratio exp(mean of logp - old over " +
          "generated tokens), shared by the sequence's tokens (ORACL Eq. 14-15; TRL importance_sampling_level); needs " +
          'aggregation seq-mean-token-mean. Default token.',
      ),
    /** Fixed length L (tokens) that Dr.GRPO divides by; required for seq-mean-token-sum-norm. */
    norm_length: z
      .number()
      .int()
      .positive()
      .nullable()
      .default(null)
      .describe(
        'Fixed length L in tokens that Dr.GRPO divides by (TRL uses max_completion_length); required by aggregation seq-mean-token-sum-norm. Default null.',
      ),
  })
  .strict();

/**
 * A rule between two settings, written once (`at`: the key an error names, the one the user set to ask for the rule's need): a zod check for TypeScript and the same rule as
 * JSON Schema if/then for the engine (protocol.schema.json), which zod cannot export from a refine.
 */
function requireWhen<K extends keyof z.input<typeof base>>(when: K, is: string, then: K, thenSchema: z.ZodType, message: string, at: K) {
  const { $schema: _, ...thenJson } = z.toJSONSchema(thenSchema);
  return {
    check: (s: z.output<typeof base>) => s[when] !== is || thenSchema.safeParse(s[then]).success,
    message,
    path: [at as string],
    json: {
      if: { properties: { [when]: { const: is } }, required: [when] },
      // biome-ignore lint/suspicious/noThenProperty: JSON Schema's if/then keyword, not a thenable
      then: { properties: { [then]: thenJson }, required: [then], description: message },
    },
  };
}

const rules = [
  requireWhen(
    'aggregation',
    'seq-mean-token-sum-norm',
    'norm_length',
    z.number().int().positive(),
    'seq-mean-token-sum-norm (Dr.GRPO) needs norm_length',
    'norm_length',
  ),
  requireWhen(
    'ratio_level',
    'sequence',
    'aggregation',
    z.literal('seq-mean-token-mean'),
    'ratio_level sequence (GSPO) averages per sequence: it needs aggregation seq-mean-token-mean',
    'ratio_level',
  ),
];

export const LossSettingsSchema = rules
  .reduce(
    (schema, r) => schema.refine(r.check, { message: r.message, path: r.path }),
    base as z.ZodType<z.output<typeof base>, z.input<typeof base>>,
  )
  .meta({ allOf: rules.map((r) => r.json) });

export type LossSettings = z.infer<typeof LossSettingsSchema>;
export type LossSettingsInput = z.input<typeof LossSettingsSchema>;
