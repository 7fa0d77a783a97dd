/**
 * Settings of ORACL's graders (Bai et al., "ORACL: Optimized Reasoning for Autoscaling via
 * Chain of Thought with LLMs for Microservices", arXiv 2602.05292, Eq. 5-11). The paper
 * leaves these constants unspecified; the defaults are this project's choices.
 */
import { z } from 'zod';

export const oraclSettings = z
  .object({
    /** beta of the F-beta score (Eq. 6-8): recall counts beta times as much as precision. Default 1 (F1). */
    beta: z.number().positive().default(1),
    /** Bonus per true positive, i.e. per true root cause predicted (Eq. 9). Default 0.5. */
    tpBonus: z.number().nonnegative().default(0.5),
    /** Penalty per false negative, i.e. per true root cause missed (Eq. 10). Default 0.5. */
    fnPenalty: z.number().nonnegative().default(0.5),
    /** Penalty when the final message breaks the tag format (Eq. 11). Default 0.5. */
    tagPenalty: z.number().nonnegative().default(0.5),
    /**
     * Tags the final assistant message must hold, each exactly once as <tag>...</tag>.
     * Default none: the protocols here carry the answer in a tool call, so only a parsed
     * answer is required.
     */
    tags: z.array(z.string().regex(/^[A-Za-z_][\w.-]*$/, 'a tag name')).default([]),
    /** Largest length penalty, reached at maxChars (Eq. 11, correct answers only). Default 0.5. */
    lengthPenalty: z.number().nonnegative().default(0.5),
    /** Assistant characters (whole episode) allowed before the length penalty starts. Default 4000. */
    targetChars: z.number().int().nonnegative().default(4000),
    /** Assistant characters at which the length penalty is full. Default 16000. */
    maxChars: z.number().int().positive().default(16000),
  })
  .strict()
  .refine((s) => s.maxChars > s.targetChars, { message: 'maxChars must exceed targetChars', path: ['maxChars'] });
export type OraclSettings = z.output<typeof oraclSettings>;
