/**
 * Settings of ORACL's graders (../shared/seeds/002, Eq. 5-11). The paper leaves every constant
 * unspecified (UNSPEC); each default below is this project's choice within the paper's bounds.
 */
import { z } from 'zod';

/** The tags of ORACL's tagged chain of thought (Table II): analysis, fault, counterfactual, root causes. */
export const ORACL_TAGS = ['think', 'Fault', 'Counterfactual', 'root'] as const;

export const oraclSettings = z
  .object({
    /** epsilon of Eq. 5 and Eq. 6: keeps the fractions defined on empty sets. Default 1e-6. */
    epsilon: z
      .number()
      .positive()
      .default(1e-6)
      .describe('epsilon of ORACL Eq. 5 and Eq. 6: keeps the fractions defined on empty sets. Default 1e-6.'),
    /** beta of F_beta (Eq. 6), over (component, fault type) pairs; the paper requires beta > 1 (recall first). Default 2. */
    beta: z
      .number()
      .gt(1)
      .default(2)
      .describe('beta of F_beta (ORACL Eq. 6), over (component, fault type) pairs; the paper requires beta > 1 (recall first). Default 2.'),
    /** alpha of Eq. 7: weight of the pod match S_pod, (1 - alpha) that of F_beta; 0 < alpha << 1. Default 0.1. */
    alpha: z
      .number()
      .gt(0)
      .lt(1)
      .default(0.1)
      .describe('alpha of ORACL Eq. 7: weight of the pod match S_pod, (1 - alpha) that of F_beta; 0 < alpha << 1. Default 0.1.'),
    /** delta of Eq. 7: bonus when at least one (component, type) pair is right. Default 0.5. */
    delta: z
      .number()
      .positive()
      .default(0.5)
      .describe('delta of ORACL Eq. 7: bonus when at least one (component, type) pair is right. Default 0.5.'),
    /** d of Eq. 8: penalty per false negative beyond the tolerance. Default 0.5. */
    fn_weight: z
      .number()
      .positive()
      .default(0.5)
      .describe('d of ORACL Eq. 8: penalty per false negative beyond the tolerance. Default 0.5.'),
    /** tau_fn of Eq. 8: false negatives tolerated before the penalty applies (a natural number). Default 0. */
    fn_tolerance: z
      .number()
      .int()
      .min(0)
      .default(0)
      .describe('tau_fn of ORACL Eq. 8: false negatives tolerated before the penalty applies (a natural number). Default 0.'),
    /**
     * Tags whose checks Eq. 9 counts in the final generation: each must appear once as a pair, open
     * before close, with non-blank content, neither nested in nor crossing another tag's pair.
     * Default think, Fault, Counterfactual, root (Table II; Carrier is input, not output).
     */
    tags: z
      .array(z.string().regex(/^[A-Za-z_][\w.-]*$/, 'a tag name'))
      .min(1)
      .default([...ORACL_TAGS])
      .describe(
        "Tags whose checks ORACL Eq. 9 counts in the final generation: each must appear once as a pair, open before close, with non-blank content, neither nested in nor crossing another tag's pair. Default think, Fault, Counterfactual, root (Table II; Carrier is input, not output).",
      ),
    /** L_min of Eq. 10, in characters of the final generation (graders see no tokens): no penalty up to it. Default 1500. */
    length_min: z
      .number()
      .int()
      .nonnegative()
      .default(1500)
      .describe('L_min of ORACL Eq. 10, in characters of the final generation (graders see no tokens): no penalty up to it. Default 1500.'),
    /** L_max of Eq. 10, characters: the penalty is -1 from here on; above expert annotation length. Default 6000. */
    length_max: z
      .number()
      .int()
      .positive()
      .default(6000)
      .describe('L_max of ORACL Eq. 10, characters: the penalty is -1 from here on; above expert annotation length. Default 6000.'),
  })
  .strict()
  .refine((s) => s.length_max > s.length_min, { message: 'length_max must exceed length_min', path: ['length_max'] });
export type OraclSettings = z.output<typeof oraclSettings>;
