/**
 * A stage's reward as data: a weighted sum of named graders. The three ThinkFL stages
 * (and ORACL's sum) are presets; a run config may name a preset or spell out its own terms.
 */
import { z } from 'zod';
import { GRADERS, graderNames } from './registry';
import { formatZodIssues } from '@thinkfl/env';

export const compositeSpec = z
  .object({
    terms: z
      .array(
        z
          .object({
            /** Registry name of the grader (registry.ts). */
            grader: z
              .string()
              .refine((n) => GRADERS.has(n), {
                error: (iss) => `unknown grader '${String(iss.input)}' (known: ${graderNames().join(', ')})`,
              })
              .describe(`Registry name of the grader: ${graderNames().join(', ')}.`),
            /** Weight of the grader's score in the sum; negative to subtract it. */
            weight: z.number().finite().describe("Weight of the grader's score in the sum; negative to subtract it."),
          })
          .strict(),
      )
      .min(1, 'a composite needs at least one term')
      .describe('The weighted graders whose scores are summed into the reward; at least one.'),
  })
  .strict();
export type CompositeSpec = z.output<typeof compositeSpec>;

export const COMPOSITE_PRESETS: Readonly<Record<string, CompositeSpec>> = {
  /** Stage 1, format-aware policy priming: recall and format. */
  stage1: {
    terms: [
      { grader: 'recall', weight: 1 },
      { grader: 'format', weight: 1 },
    ],
  },
  /** Stage 2, guided exploration: recall weighted slightly above diversity. */
  stage2: {
    terms: [
      { grader: 'recall', weight: 1 },
      { grader: 'diversity', weight: 0.8 },
    ],
  },
  /** Stage 3, rank-oriented refinement: the multi-factor grader (Eq. 8). */
  stage3: { terms: [{ grader: 'multi_factor', weight: 1 }] },
  /** This project's own: the per-request reciprocal rank of the root cause's service (MRR as the reward), for any stage. */
  reciprocal_rank: { terms: [{ grader: 'reciprocal_rank', weight: 1 }] },
  /**
   * ORACL's reward, Eq. 13 without its KL term (that is the loss's kl_coef): R_result (Eq. 7-8)
   * + R_format (Eq. 9) + R_length (Eq. 11); penalties already score negative.
   */
  oracl: {
    terms: [
      { grader: 'oracl_result', weight: 1 },
      { grader: 'oracl_tag_format', weight: 1 },
      { grader: 'oracl_length', weight: 1 },
    ],
  },
};

/** A preset name or an explicit spec; `yamlPath` is where it sits in the run config. */
export function parseComposite(input: unknown, yamlPath = 'reward'): CompositeSpec {
  if (typeof input === 'string') {
    const preset = COMPOSITE_PRESETS[input];
    if (!preset) {
      throw new Error(`${yamlPath}: unknown composite '${input}' (presets: ${Object.keys(COMPOSITE_PRESETS).join(', ')})`);
    }
    return preset;
  }
  const r = compositeSpec.safeParse(input);
  if (!r.success) throw new Error(`invalid composite:\n${formatZodIssues(r.error, yamlPath, { separator: '\n' })}`);
  return r.data;
}
