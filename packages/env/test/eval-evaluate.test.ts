import { beforeAll, describe, expect, it } from 'vitest';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { loadDataset, type LoadedDataset } from '../src/datasets';
import { evaluate, formatSummary, solverFor, spreadCases, type Solve } from '../src/eval';
import type { Case } from '../src/types';

let ds: LoadedDataset;

beforeAll(async () => {
  ds = await loadDataset(await ensureNezhaDataset());
});

describe('spreadCases', () => {
  it('covers as many faults as the limit allows, in dataset order within a fault', () => {
    const faults = new Set(ds.cases.map((c) => c.fault_id));
    const picked = spreadCases(ds.cases, faults.size);
    expect(new Set(picked.map((c) => c.fault_id)).size).toBe(faults.size);
    for (const c of picked) expect(c).toBe(ds.cases.find((x) => x.fault_id === c.fault_id));
    expect(spreadCases(ds.cases, faults.size + 3).length).toBe(faults.size + 3);
    expect(spreadCases(ds.cases)).toBe(ds.cases);
  });
});

describe('evaluate on hand-labelled answers', () => {
  // Two real faults, their first requests answered by a script; every rank below is counted by
  // hand from these answers (0-based, distinct components at the level, a pod counting as its
  // service at service level; RCLAgent Eq. 9-10, ThinkFL Eq. 12-13).
  const A = 'nezha-20230129-085816'; // truth: ts-contacts-service, pod ts-contacts-service-866bd68c97-xcqfx
  const B = 'nezha-20230129-090353'; // truth: ts-basic-service, pod ts-basic-service-5dc8d4f9fd-46997
  const PA = 'ts-contacts-service-866bd68c97-xcqfx';
  const PX = 'ts-order-service-5b67c48447-mv5hb';
  const answers: ((c: Case) => ReturnType<Solve>)[] = [
    // a1 service: ts-order-service 0, ts-contacts-service (PA's) 1 -> 1. pod: the service item names no pod; PA 0 -> 0.
    async () => ({ answer: [{ service: 'ts-order-service' }, { pod: PA }] }),
    // a2 service: ts-order-service 0 (service and its pod PX share it), ts-station-service 1, ts-contacts-service 2 -> 2.
    //    pod: PX 0, no other pod -> absent (null).
    async () => ({
      answer: [{ service: 'ts-order-service' }, { pod: PX }, { service: 'ts-station-service' }, { service: 'ts-contacts-service' }],
    }),
    // a3 throws: absent at both levels, its error kept.
    async () => {
      throw new Error('solver failed on a3');
    },
    // b1 service: ts-basic-service 0 -> 0. pod: none named -> null.
    async () => ({ answer: [{ service: 'ts-basic-service' }] }),
    // b2 an empty answer: null, null.
    async () => ({ answer: [] }),
  ];

  it('ranks requests, faults by their best request and by vote, and sums them up as counted by hand', async () => {
    const picked = [...ds.cases.filter((c) => c.fault_id === A).slice(0, 3), ...ds.cases.filter((c) => c.fault_id === B).slice(0, 2)];
    expect(picked.map((c) => c.truth.service)).toEqual([
      'ts-contacts-service',
      'ts-contacts-service',
      'ts-contacts-service',
      'ts-basic-service',
      'ts-basic-service',
    ]);
    expect(picked[0].truth.pod).toBe(PA);
    const solve: Solve = (c) => answers[picked.indexOf(c)](c);
    const r = await evaluate(ds, picked, solve, { concurrency: 1 });

    expect(r.levels).toEqual(['service', 'pod']);
    expect(r.requests.map((q) => q.ranks)).toEqual([
      { service: 1, pod: 0 },
      { service: 2, pod: null },
      { service: null, pod: null },
      { service: 0, pod: null },
      { service: null, pod: null },
    ]);
    expect(r.requests[2].error).toBe('solver failed on a3');

    // Best request: A min(1, 2, -) = 1 at service, min(0, -, -) = 0 at pod; B 0 at service, absent at pod.
    // Vote of the top answers: A's service tops are ts-order-service twice (a3 casts none), so the
    // truth gets no vote: null; A's pod tops are PA (a1) and PX (a2), one each, PA seen first: 0.
    // B's service tops: ts-basic-service once: 0; B names no pod: null. One batch each (< 10 requests).
    const byId = new Map(r.faults.map((f) => [f.fault_id, f]));
    expect(byId.get(A)).toMatchObject({
      cases: 3,
      ranks: { service: 1, pod: 0 },
      vote_ranks: { service: null, pod: 0 },
      batch_vote_ranks: { service: [null], pod: [0] },
    });
    expect(byId.get(B)).toMatchObject({
      cases: 2,
      ranks: { service: 0, pod: null },
      vote_ranks: { service: 0, pod: null },
      batch_vote_ranks: { service: [0], pod: [null] },
    });

    // Per request, service ranks 1, 2, -, 0, -: Recall@1 1/5, @2 2/5, @3 3/5;
    // MRR (1/2 + 1/3 + 0 + 1 + 0) / 5 = (11/6) / 5 = 11/30.
    expect(r.per_request.service).toMatchObject({ n: 5, found: 3, recall: { 1: 0.2, 2: 0.4, 3: 0.6, 5: 0.6, 10: 0.6 } });
    expect(r.per_request.service!.mrr).toBeCloseTo(11 / 30, 12);
    // Per request, pod ranks 0, -, -, -, -: Recall@1 1/5, MRR 1/5.
    expect(r.per_request.pod).toMatchObject({ n: 5, found: 1, recall: { 1: 0.2, 10: 0.2 } });
    expect(r.per_request.pod!.mrr).toBeCloseTo(0.2, 12);
    // Per fault (best), service 1 and 0: Recall@1 1/2, @2 1; MRR (1/2 + 1) / 2 = 3/4. Pod 0 and -: 1/2, MRR 1/2.
    expect(r.per_fault.service).toMatchObject({ n: 2, found: 2, recall: { 1: 0.5, 2: 1 } });
    expect(r.per_fault.service!.mrr).toBeCloseTo(0.75, 12);
    expect(r.per_fault.pod).toMatchObject({ n: 2, found: 1, recall: { 1: 0.5, 10: 0.5 } });
    expect(r.per_fault.pod!.mrr).toBeCloseTo(0.5, 12);
    // Per fault by vote, service - and 0: Recall@1 1/2, MRR 1/2.
    expect(r.per_fault_vote!.service).toMatchObject({ n: 2, found: 1, recall: { 1: 0.5 } });
    expect(r.per_fault_vote!.service!.mrr).toBeCloseTo(0.5, 12);
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
    // Ranks themselves are checked on hand-labelled answers below; here, how they add up.
    for (const q of r.requests) expect(Object.keys(q.ranks).sort()).toEqual(['pod', 'service']);
    for (const f of r.faults) {
      const mine = r.requests.filter((q) => q.fault_id === f.fault_id);
      expect(f.cases).toBe(mine.length);
      const found = mine.map((q) => q.ranks.service).filter((x): x is number => typeof x === 'number');
      expect(f.ranks.service).toBe(found.length ? Math.min(...found) : null);
    }
    expect(r.per_request.service!.n).toBe(cases.length);
    for (const k of [1, 3, 5]) {
      const hits = r.requests.filter((q) => q.ranks.service !== null && q.ranks.service! < k).length;
      expect(r.per_request.service!.recall[k] * cases.length).toBeCloseTo(hits, 9);
    }
    expect(r.per_fault.service!.n).toBe(new Set(cases.map((c) => c.fault_id)).size);
    // A fault counts as found at k when any of its requests is.
    for (const k of [1, 3, 5]) {
      const found = r.faults.filter((f) =>
        r.requests.some((q) => q.fault_id === f.fault_id && q.ranks.service !== null && q.ranks.service! < k),
      );
      expect(r.per_fault.service!.recall[k] * r.per_fault.service!.n).toBeCloseTo(found.length, 9);
    }
    expect(r.faults_without_cases).toEqual(ds.faults.filter((f) => f.case_count === 0).map((f) => f.id));
    expect(formatSummary(r, r.levels)).toMatch(/per fault, service\s+\d+/);
  });

  it("ranks each fault by the vote of its requests' top answers, in full and in batches of 10", async () => {
    const r = await evaluate(ds, ds.cases, solverFor(ds, 'selftime'));
    for (const f of r.faults) {
      const mine = r.requests.filter((q) => q.fault_id === f.fault_id);
      // Counted by hand here: votes per top service, ties kept in first-seen order.
      const votes = new Map<string, number>();
      for (const q of mine) {
        const top = q.answer?.[0];
        const svc = top?.service ?? (top?.pod ? ds.topology.serviceOfPod(top.pod) : undefined);
        if (svc) votes.set(svc, (votes.get(svc) ?? 0) + 1);
      }
      const order = [...votes].sort((a, b) => b[1] - a[1]).map(([s]) => s);
      const at = order.indexOf(f.truth.service!);
      expect(f.vote_ranks.service).toBe(at < 0 ? null : at);
      expect(f.batch_vote_ranks.service).toHaveLength(Math.ceil(mine.length / 10));
      // A vote can never beat the best request.
      if (f.vote_ranks.service !== null) expect(f.vote_ranks.service!).toBeGreaterThanOrEqual(f.ranks.service!);
    }
    expect(r.per_fault_vote!.service!.n).toBe(r.faults.length);
    expect(r.per_batch_vote!.service!.n).toBe(r.faults.reduce((n, f) => n + f.batch_vote_ranks.service!.length, 0));
    expect(formatSummary(r, r.levels)).toMatch(/per fault by vote, service\s+\d+/);
  });

  it('counts a policy that throws as a miss with its error', async () => {
    const r = await evaluate(ds, cases.slice(0, 3), async (c) => {
      if (c === cases[1]) throw new Error('boom');
      return { answer: [{ service: c.truth.service }] };
    });
    expect(r.requests.map((q) => q.ranks.service)).toEqual([0, null, 0]);
    expect(r.requests[1].error).toBe('boom');
    expect(r.per_request.service!.recall[1]).toBeCloseTo(2 / 3, 12);
  });

  it('plays agent policies through the protocol and keeps the stop reason', async () => {
    const r = await evaluate(ds, cases.slice(0, 3), solverFor(ds, 'expert', { protocol: 'rot', episode: { d_max: 4 } }), {
      concurrency: 2,
    });
    for (const q of r.requests) {
      expect(q.stop_reason).toBe('answered');
      expect(q.tool_calls).toBeLessThanOrEqual(4);
    }
  });

  it('rejects an unknown protocol for an agent', () => {
    const solve = solverFor(ds, 'expert', { protocol: 'nope' });
    return expect(solve(cases[0])).rejects.toThrow(/unknown protocol "nope"/);
  });
});
