/**
 * ORACL grades a set of predicted causes against the set of true ones. Here the truth is
 * one component; the prediction is the distinct components the answer names at the
 * truth's level (items naming none there are left out).
 */
import { componentAt, type EpisodeRecord } from '@thinkfl/env';
import { answerKey, matchContext, normalizeItem, truthRank } from '../match';
import type { GradeContext } from '../types';

export interface CauseSets {
  predicted: number;
  truePositives: number;
  falsePositives: number;
  falseNegatives: number;
}

export function causeSets(episode: EpisodeRecord, ctx: GradeContext): CauseSets {
  const mc = matchContext(ctx.podToService);
  const predicted = new Set<string>();
  for (const item of episode.answer ?? []) {
    if (componentAt(normalizeItem(item), ctx.truth.level, mc) !== undefined) predicted.add(answerKey(item, ctx));
  }
  const tp = truthRank(episode.answer, ctx) === null ? 0 : 1;
  return { predicted: predicted.size, truePositives: tp, falsePositives: predicted.size - tp, falseNegatives: 1 - tp };
}
