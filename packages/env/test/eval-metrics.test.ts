import { describe, expect, it } from 'vitest';
import { batchVoteRanks, bestRank, rankOfTruth, summarizeRanks, voteRank, type MatchContext } from '../src/eval';
import type { GroundTruth } from '../src/types';

const ctx: MatchContext = {
  serviceOfPod: (pod) => ({ 'ts-a-1-x': 'ts-a', 'ts-a-2-y': 'ts-a', 'ts-b-1-x': 'ts-b', 'ts-c-1-x': 'ts-c' })[pod],
};
const truth: GroundTruth = { level: 'pod', pod: 'ts-b-1-x', service: 'ts-b' };

describe('rankOfTruth', () => {
  it('ranks by distinct components at the level', () => {
    const answer = [{ pod: 'ts-a-1-x' }, { pod: 'ts-a-2-y' }, { pod: 'ts-b-1-x' }];
    // Two pods of ts-a are one service guess: ts-b is second at service level, third at pod level.
    expect(rankOfTruth(answer, truth, 'service', ctx)).toBe(1);
    expect(rankOfTruth(answer, truth, 'pod', ctx)).toBe(2);
  });

  it('matches a service-level item against a pod-labelled truth', () => {
    expect(rankOfTruth([{ service: 'ts-c' }, { service: 'ts-b' }], truth, 'service', ctx)).toBe(1);
    expect(rankOfTruth([{ service: 'ts-c' }, { service: 'ts-b' }], truth, 'pod', ctx)).toBeNull();
  });

  it('repeats of a component do not push the truth down', () => {
    const answer = [{ service: 'ts-a' }, { pod: 'ts-a-1-x' }, { service: 'ts-a' }, { service: 'ts-b' }];
    expect(rankOfTruth(answer, truth, 'service', ctx)).toBe(1);
  });

  it('items naming nothing at the level take no rank', () => {
    expect(rankOfTruth([{ node: 'n1' }, { reason: 'x' }, { pod: 'ts-b-1-x' }], truth, 'service', ctx)).toBe(0);
  });

  it('absent truth, empty and null answers give null', () => {
    expect(rankOfTruth([{ pod: 'ts-c-1-x' }], truth, 'service', ctx)).toBeNull();
    expect(rankOfTruth([], truth, 'pod', ctx)).toBeNull();
    expect(rankOfTruth(null, truth, 'pod', ctx)).toBeNull();
  });

  it('a level the truth does not name is not applicable', () => {
    expect(rankOfTruth([{ node: 'n1' }], truth, 'node', ctx)).toBeUndefined();
    expect(rankOfTruth([{ pod: 'ts-b-1-x' }], { level: 'service', service: 'ts-b' }, 'pod', ctx)).toBeUndefined();
  });

  it('an unknown pod cannot stand for a service', () => {
    expect(rankOfTruth([{ pod: 'ghost-pod' }, { pod: 'ts-b-1-x' }], truth, 'service', ctx)).toBe(0);
  });
});

describe('summarizeRanks', () => {
  it('computes Recall@k and MRR on a hand-computed table', () => {
    // ranks 0, 2, absent, 4, 0 -> R@1 2/5, R@2 2/5, R@3 3/5, R@5 4/5, R@10 4/5;
    // MRR = (1 + 1/3 + 0 + 1/5 + 1) / 5 = 2.5333.../5
    const s = summarizeRanks([0, 2, null, 4, 0]);
    expect(s.n).toBe(5);
    expect(s.found).toBe(4);
    expect(s.recall).toEqual({ 1: 0.4, 2: 0.4, 3: 0.6, 5: 0.8, 10: 0.8 });
    expect(s.mrr).toBeCloseTo((1 + 1 / 3 + 0 + 1 / 5 + 1) / 5, 12);
  });

  it('ties count once each and k beyond every rank gives full recall of found items', () => {
    const s = summarizeRanks([1, 1, 1, null], [1, 2, 50]);
    expect(s.recall).toEqual({ 1: 0, 2: 0.75, 50: 0.75 });
    expect(s.mrr).toBeCloseTo(0.375, 12);
  });

  it('MRR with the top-10 cut-off (RCLAgent Eq. 9) counts ranks 10 and beyond as absent', () => {
    // 0-based ranks 0, 9, 10, 14: MRR = (1 + 1/10 + 1/11 + 1/15)/4; top-10 MRR = (1 + 1/10)/4 = 0.275
    const s = summarizeRanks([0, 9, 10, 14]);
    expect(s.mrr).toBeCloseTo((1 + 1 / 10 + 1 / 11 + 1 / 15) / 4, 12);
    expect(s.mrr_top10).toBeCloseTo(0.275, 12);
  });

  it('an empty table gives zeros, not NaN', () => {
    const s = summarizeRanks([]);
    expect(s.n).toBe(0);
    expect(s.mrr).toBe(0);
    expect(Object.values(s.recall).every((v) => v === 0)).toBe(true);
  });

  it('rejects a negative or fractional rank', () => {
    expect(() => summarizeRanks([-1])).toThrow(/non-negative integer/);
    expect(() => summarizeRanks([0.5])).toThrow(/non-negative integer/);
  });
});

describe('bestRank', () => {
  it("takes a fault's best request, ignoring misses", () => {
    expect(bestRank([null, 3, 1, null, 1])).toBe(1);
    expect(bestRank([null, null])).toBeNull();
    expect(bestRank([])).toBeNull();
  });
});

describe('voteRank (RCLAgent Eq. 10)', () => {
  it('orders components by votes, ties in first-seen order', () => {
    // votes: b 3, a 2, c 2 (a seen before c), d 1 -> order b, a, c, d
    const tops = ['a', 'b', 'c', 'b', 'a', 'c', 'b', 'd', null, undefined];
    expect(voteRank(tops, 'b')).toBe(0);
    expect(voteRank(tops, 'a')).toBe(1);
    expect(voteRank(tops, 'c')).toBe(2);
    expect(voteRank(tops, 'd')).toBe(3);
    expect(voteRank(tops, 'e')).toBeNull();
    // c seen first now: c before a at equal counts
    expect(voteRank(['c', 'a', 'a', 'c'], 'a')).toBe(1);
  });

  it('differs from the best rank: one lucky request does not make a fault found first', () => {
    expect(voteRank(['x', 'x', 'truth'], 'truth')).toBe(1);
  });

  it("RCLAgent's script mode: consecutive batches of 10, one rank each", () => {
    // batch 1: 6 x, 4 t -> t second; batch 2: 7 t, 3 x -> t first; batch 3 (2 requests): x, y -> t absent
    const tops = [...Array(6).fill('x'), ...Array(4).fill('t'), ...Array(7).fill('t'), ...Array(3).fill('x'), 'x', 'y'];
    expect(batchVoteRanks(tops, 't')).toEqual([1, 0, null]);
    const s = summarizeRanks(batchVoteRanks(tops, 't'));
    expect(s.recall[1]).toBeCloseTo(1 / 3, 12);
    expect(s.mrr).toBeCloseTo((1 / 2 + 1) / 3, 12);
  });
});
