/**
 * Per-fault rank by majority vote (RCLAgent Eq. 10, R̂ = argmax_r Σ_i 1(r_i = r)): hand-counted
 * votes of the requests' top-1 answers, ties in first-seen order, and on the real dataset a
 * fault found by one lucky request is found by its best rank but not by vote.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { loadDataset, type LoadedDataset } from '../src/datasets';
import { evaluate, formatComparison, spreadCases, topComponent, voteOrder, voteRank, type MatchContext } from '../src/eval';
import type { GroundTruth } from '../src/types';

const ctx: MatchContext = {
  serviceOfPod: (pod) => ({ 'ts-a-1-x': 'ts-a', 'ts-a-2-y': 'ts-a', 'ts-b-1-x': 'ts-b', 'ts-c-1-x': 'ts-c' })[pod],
};
const truth: GroundTruth = { level: 'pod', pod: 'ts-b-1-x', service: 'ts-b' };

describe('voteRank', () => {
  it('counts each request\'s top-1 only, most votes first', () => {
    // Tops at service level: ts-a, ts-b, ts-a, ts-c, ts-b, ts-b -> ts-b 3, ts-a 2, ts-c 1.
    const answers = [
      [{ pod: 'ts-a-1-x' }, { pod: 'ts-b-1-x' }],
      [{ service: 'ts-b' }],
      [{ pod: 'ts-a-2-y' }],
      [{ service: 'ts-c' }, { service: 'ts-b' }],
      [{ pod: 'ts-b-1-x' }],
      [{ pod: 'ts-b-1-x' }, { pod: 'ts-a-1-x' }],
    ];
    expect(voteOrder(answers, 'service', ctx)).toEqual([
      { component: 'ts-b', votes: 3 },
      { component: 'ts-a', votes: 2 },
      { component: 'ts-c', votes: 1 },
    ]);
    expect(voteRank(answers, truth, 'service', ctx)).toBe(0);
    // At pod level the service-only answers name no pod: tops ts-a-1-x, ts-a-2-y, ts-b-1-x x2 (the 4th answer has no pod).
    expect(voteOrder(answers, 'pod', ctx)).toEqual([
      { component: 'ts-b-1-x', votes: 2 },
      { component: 'ts-a-1-x', votes: 1 },
      { component: 'ts-a-2-y', votes: 1 },
    ]);
  });

  it('breaks ties by first occurrence in request order', () => {
    const answers = [[{ service: 'ts-c' }], [{ service: 'ts-b' }], [{ service: 'ts-b' }], [{ service: 'ts-c' }], [{ service: 'ts-a' }]];
    // ts-c 2 (seen first), ts-b 2, ts-a 1.
    expect(voteRank(answers, truth, 'service', ctx)).toBe(1);
    expect(voteRank([[{ service: 'ts-b' }], [{ service: 'ts-c' }]], truth, 'service', ctx)).toBe(0);
  });

  it('a truth that is never anyone\'s top-1 gets null, even when it is in every answer', () => {
    const answers = [[{ service: 'ts-a' }, { service: 'ts-b' }], [{ service: 'ts-c' }, { service: 'ts-b' }], null];
    expect(voteRank(answers, truth, 'service', ctx)).toBeNull();
    expect(voteRank([], truth, 'service', ctx)).toBeNull();
  });

  it('skips items that name nothing at the level and is undefined where the truth names nothing', () => {
    expect(topComponent([{ node: 'n1' }, { reason: 'x' }, { pod: 'ts-c-1-x' }], 'service', ctx)).toBe('ts-c');
    expect(voteRank([[{ node: 'n1' }]], truth, 'node', ctx)).toBeUndefined();
  });
});

describe('vote rank in evaluate', () => {
  let ds: LoadedDataset;
  beforeAll(async () => {
    ds = await loadDataset(await ensureNezhaDataset());
  });

  it('a fault with one correct request of three is found by best rank, not by vote', async () => {
    const faultId = ds.faults.find((f) => ds.cases.filter((c) => c.faultId === f.id).length >= 3)!.id;
    const cases = ds.cases.filter((c) => c.faultId === faultId).slice(0, 3);
    const wrong = ds.topology.services.find((s) => s !== cases[0].truth.service)!;
    const r = await evaluate(ds, cases, async (c) => ({ answer: c === cases[1] ? [{ service: c.truth.service }] : [{ service: wrong }, { service: c.truth.service }] }));
    expect(r.faults[0].ranks.service).toBe(0);
    // Votes: wrong 2, truth 1.
    expect(r.faults[0].voteRanks.service).toBe(1);
    expect(r.perFault.service!.recall[1]).toBe(1);
    expect(r.perFaultVote.service!.recall[1]).toBe(0);
    expect(r.perFaultVote.service!.mrr).toBeCloseTo(0.5, 12);
  });

  it('puts several policies side by side, one row per policy in each scope', async () => {
    const cases = spreadCases(ds.cases, 6);
    const right = await evaluate(ds, cases, async (c) => ({ answer: [{ service: c.truth.service }] }));
    const none = await evaluate(ds, cases, async () => ({ answer: null }));
    const table = formatComparison([{ policy: 'right', summary: right }, { policy: 'none', summary: none }], right.levels).split('\n');
    const rows = (scope: string) => table.filter((l) => l.startsWith(`${scope} `));
    expect(rows('per fault by vote, service').map((l) => l.split(/\s+/)[5])).toEqual(['right', 'none']);
    expect(rows('per request, service')[0]).toMatch(/right\s+6\s+100\.00\s+100\.00\s+100\.00\s+100\.00\s+100\.00\s+1\.0000$/);
    expect(rows('per request, service')[1]).toMatch(/none\s+6\s+0\.00\s+0\.00\s+0\.00\s+0\.00\s+0\.00\s+0\.0000$/);
  });
});
