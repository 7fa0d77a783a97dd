/** Diversity grader, ThinkFL Algorithm 2: reward reasoning paths new for this question. */
import { randomUUID } from 'node:crypto';
import { dedupedCalls, pathKey } from '../diversity/path-key';
import { truthRank } from '../match';
import type { Grader } from '../types';

export const diversity: Grader = {
  name: 'diversity',
  description: 'ThinkFL Algorithm 2: A for a new solving path, B for a new path, C for a seen one',
  async grade(episode, ctx) {
    if (!ctx.diversity) throw new Error("the 'diversity' grader needs a DiversityCache in the grading context");
    // Ranked before marking, so that a bad ground truth fails without recording the path.
    const solved = truthRank(episode.answer, ctx) === 0;
    const isNew = await ctx.diversity.markSeen(ctx.questionId, pathKey(episode.path), ctx.sampleId ?? randomUUID());
    const { a, b, c } = ctx.settings.diversity;
    return {
      score: isNew ? (solved ? a : b) : c,
      parts: { new: isNew ? 1 : 0, solved: solved ? 1 : 0, steps: dedupedCalls(episode.path).length },
    };
  },
};
