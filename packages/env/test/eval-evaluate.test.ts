import { beforeAll, describe, expect, it } from 'vitest';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { loadDataset, type LoadedDataset } from '../src/datasets';
import { bestRank, evaluate, formatSummary, rankOfTruth, solverFor, spreadCases, summarizeRanks } from '../src/eval';
import type { Case } from '../src/types';

let ds: LoadedDataset;

beforeAll(async () => {
  ds = await loadDataset(await ensureNezhaDataset());
});

describe('spreadCases', () => {
  it('covers as many faults as the limit allows, in dataset order within a fault', () => {
    const faults = new Set(ds.cases.map((c) => c.faultId));
    const picked = spreadCases(ds.cases, faults.size);
    expect(new Set(picked.map((c) => c.faultId)).size).toBe(faults.size);
    for (const c of picked) expect(c).toBe(ds.cases.find((x) => x.faultId === c.faultId));
    expect(spreadCases(ds.cases, faults.size + 3).length).toBe(faults.size + 3);
    expect(spreadCases(ds.cases)).toBe(ds.cases);
  });
});

describe('evaluate on the real dataset', () => {
  let cases: Case[];
  beforeAll(() => {
    cases = spreadCases(ds.cases, 40);
  });

  it('scores each request at service and pod level, and each fault by its best request', async () => {
    const r = await evaluate(ds, cases, solverFor(ds, 'selftime'));
    // Nezha labels pods: service and pod apply, node does not.
    expect(r.levels).toEqual(['service', 'pod']);
    expect(r.requests).toHaveLength(cases.length);
    for (const q of r.requests) {
      const c = cases.find((x) => x.id === q.caseId)!;
      expect(q.ranks.service).toBe(rankOfTruth(q.answer, c.truth, 'service', ds.topology));
      expect(q.ranks.pod).toBe(rankOfTruth(q.answer, c.truth, 'pod', ds.topology));
    }
    for (const f of r.faults) {
      const mine = r.requests.filter((q) => q.faultId === f.faultId);
      expect(f.cases).toBe(mine.length);
      expect(f.ranks.service).toBe(bestRank(mine.map((q) => q.ranks.service ?? null)));
    }
    expect(r.perRequest.service).toEqual(summarizeRanks(r.requests.map((q) => q.ranks.service ?? null)));
    expect(r.perFault.service!.n).toBe(new Set(cases.map((c) => c.faultId)).size);
    // A fault counts as found at k when any of its requests is.
    for (const k of [1, 3, 5]) {
      const found = r.faults.filter((f) => r.requests.some((q) => q.faultId === f.faultId && q.ranks.service !== null && q.ranks.service! < k));
      expect(r.perFault.service!.recall[k] * r.perFault.service!.n).toBeCloseTo(found.length, 9);
    }
    expect(r.faultsWithoutCases).toEqual(ds.faults.filter((f) => f.caseCount === 0).map((f) => f.id));
    expect(formatSummary(r, r.levels)).toMatch(/per fault, service\s+\d+/);
  });

  it("ranks each fault by the vote of its requests' top answers, in full and in batches of 10", async () => {
    const r = await evaluate(ds, ds.cases, solverFor(ds, 'selftime'));
    for (const f of r.faults) {
      const mine = r.requests.filter((q) => q.faultId === f.faultId);
      // Counted by hand here: votes per top service, ties kept in first-seen order.
      const votes = new Map<string, number>();
      for (const q of mine) {
        const top = q.answer?.[0];
        const svc = top?.service ?? (top?.pod ? ds.topology.serviceOfPod(top.pod) : undefined);
        if (svc) votes.set(svc, (votes.get(svc) ?? 0) + 1);
      }
      const order = [...votes].sort((a, b) => b[1] - a[1]).map(([s]) => s);
      const at = order.indexOf(f.truth.service!);
      expect(f.voteRanks.service).toBe(at < 0 ? null : at);
      expect(f.batchVoteRanks.service).toHaveLength(Math.ceil(mine.length / 10));
      // A vote can never beat the best request.
      if (f.voteRanks.service !== null) expect(f.voteRanks.service!).toBeGreaterThanOrEqual(f.ranks.service!);
    }
    expect(r.perFaultVote!.service!.n).toBe(r.faults.length);
    expect(r.perBatchVote!.service!.n).toBe(r.faults.reduce((n, f) => n + f.batchVoteRanks.service!.length, 0));
    expect(formatSummary(r, r.levels)).toMatch(/per fault by vote, service\s+\d+/);
  });

  it('counts a policy that throws as a miss with its error', async () => {
    const r = await evaluate(ds, cases.slice(0, 3), async (c) => {
      if (c === cases[1]) throw new Error('boom');
      return { answer: [{ service: c.truth.service }] };
    });
    expect(r.requests.map((q) => q.ranks.service)).toEqual([0, null, 0]);
    expect(r.requests[1].error).toBe('boom');
    expect(r.perRequest.service!.recall[1]).toBeCloseTo(2 / 3, 12);
  });

  it('plays agent policies through the protocol and keeps the stop reason', async () => {
    const r = await evaluate(ds, cases.slice(0, 3), solverFor(ds, 'expert', { protocol: 'rot', episode: { dMax: 4 } }), { concurrency: 2 });
    for (const q of r.requests) {
      expect(q.stopReason).toBe('answered');
      expect(q.toolCalls).toBeLessThanOrEqual(4);
    }
  });

  it('rejects an unknown protocol for an agent', () => {
    const solve = solverFor(ds, 'expert', { protocol: 'nope' });
    return expect(solve(cases[0])).rejects.toThrow(/unknown protocol "nope"/);
  });
});
