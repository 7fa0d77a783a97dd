import { describe, expect, it } from 'vitest';
import type { RootCause } from '@thinkfl/env';
import { recall, recallScore, type GraderSettingsInput } from '../src/index';
import { ctxFor, episode, POD, POD_TRUTH } from './fixtures/episodes';

/** `n` distinct wrong pods, then the true one: the truth at rank n. */
function truthAtRank(n: number): RootCause[] {
  return [...Array.from({ length: n }, (_, i) => ({ pod: `ts-other-service-${i}` })), { pod: POD.contacts }];
}

describe('recall grader (Eq. 9)', () => {
  const table: { name: string; answer: RootCause[] | null; settings?: GraderSettingsInput; score: number; rank: number }[] = [
    { name: 'rank 0', answer: truthAtRank(0), score: 1, rank: 0 }, // 1 - 0/10
    { name: 'rank 3', answer: truthAtRank(3), score: 0.7, rank: 3 }, // 1 - 3/10
    { name: 'rank 9', answer: truthAtRank(9), score: 0.1, rank: 9 }, // 1 - 9/10
    { name: 'rank r_max', answer: truthAtRank(10), score: 0, rank: 10 }, // 1 - 10/10 (paper as written)
    { name: 'rank beyond r_max', answer: truthAtRank(11), score: 0.1, rank: 11 }, // 1/10
    { name: 'far beyond r_max', answer: truthAtRank(30), score: 0.1, rank: 30 }, // 1/10
    { name: 'r_max 4, rank 1', answer: truthAtRank(1), settings: { recall: { r_max: 4 } }, score: 0.75, rank: 1 }, // 1 - 1/4
    { name: 'r_max 4, rank 5', answer: truthAtRank(5), settings: { recall: { r_max: 4 } }, score: 0.25, rank: 5 }, // 1/4
    { name: 'absent', answer: [{ pod: POD.order }], score: 0, rank: -1 }, // missing_score
    {
      name: 'absent, missing_score -0.5',
      answer: [{ pod: POD.order }],
      settings: { recall: { missing_score: -0.5 } },
      score: -0.5,
      rank: -1,
    },
    { name: 'empty answer', answer: [], score: 0, rank: -1 },
    { name: 'no answer', answer: null, score: 0, rank: -1 },
    // The repeated wrong pod takes one rank: truth at rank 1 -> 1 - 1/10.
    { name: 'duplicates before the truth', answer: [{ pod: POD.order }, { pod: POD.order }, { pod: POD.contacts }], score: 0.9, rank: 1 },
  ];
  it.each(table)('$name', async ({ answer, settings, score, rank }) => {
    const r = await recall.grade(episode({ answer }), ctxFor(POD_TRUTH, settings));
    expect(r.score).toBeCloseTo(score, 12);
    expect(r.parts.rank).toBe(rank);
    expect(r.parts.found).toBe(rank >= 0 ? 1 : 0);
  });

  it('recallScore is the formula on its own', () => {
    const s = { r_max: 10, missing_score: 0 };
    expect([0, 5, 10, 11, null].map((r) => recallScore(r, s))).toEqual([1, 0.5, 0, 0.1, 0]);
  });
});
