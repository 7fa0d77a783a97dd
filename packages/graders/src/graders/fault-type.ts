/**
 * Fault-type grader (KnowledgeMind FT@k as a reward): 1/(r+1) where r is the 0-based place of
 * the true fault type among the types the answer gives for its first component, when that
 * component is the truth (FL@1); 0 otherwise, and 0 when the question has no known type.
 */
import { faultTypeRank } from '@thinkfl/env';
import { matchContext, normalizeItem } from '../match';
import type { GradeResult, Grader } from '../types';

export const faultType: Grader = {
  name: 'fault_type',
  description: 'KnowledgeMind FT@k: 1/(r+1) for the true type at place r with the top component right, else 0',
  grade(episode, ctx): GradeResult {
    if (ctx.faultType === undefined) return { score: 0, parts: { typeKnown: 0 } };
    const answer =
      episode.answer?.map((item) => ({ ...normalizeItem(item), type: typeof item?.type === 'string' ? item.type : undefined })) ?? null;
    const truth = { ...normalizeItem(ctx.truth), level: ctx.truth.level };
    const r = faultTypeRank(answer, truth, ctx.faultType, ctx.truth.level, matchContext(ctx.podToService));
    return { score: r === null ? 0 : 1 / (r + 1), parts: { typeKnown: 1, rank: r ?? -1 } };
  },
};
