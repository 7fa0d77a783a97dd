/**
 * Per-fault rank by majority vote (RCLAgent Eq. 10) in evaluate, on the real dataset: a fault
 * found by one lucky request is found by its best rank but not by vote; several policies side
 * by side. The vote itself is hand-checked in eval-metrics.test.ts.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { loadDataset, type LoadedDataset } from '../src/datasets';
import { evaluate, formatComparison, spreadCases } from '../src/eval';

describe('vote rank in evaluate', () => {
  let ds: LoadedDataset;
  beforeAll(async () => {
    ds = await loadDataset(await ensureNezhaDataset());
  });

  it('a fault with one correct request of three is found by best rank, not by vote', async () => {
    const faultId = ds.faults.find((f) => ds.cases.filter((c) => c.fault_id === f.id).length >= 3)!.id;
    const cases = ds.cases.filter((c) => c.fault_id === faultId).slice(0, 3);
    const wrong = ds.topology.services.find((s) => s !== cases[0].truth.service)!;
    const r = await evaluate(ds, cases, async (c) => ({
      answer: c === cases[1] ? [{ service: c.truth.service }] : [{ service: wrong }, { service: c.truth.service }],
    }));
    expect(r.faults[0].ranks.service).toBe(0);
    // Votes: wrong 2, truth 1.
    expect(r.faults[0].vote_ranks.service).toBe(1);
    expect(r.per_fault.service!.recall[1]).toBe(1);
    expect(r.per_fault_vote!.service!.recall[1]).toBe(0);
    expect(r.per_fault_vote!.service!.mrr).toBeCloseTo(0.5, 12);
  });

  it('puts several policies side by side, one row per policy in each scope', async () => {
    const cases = spreadCases(ds.cases, 6);
    const right = await evaluate(ds, cases, async (c) => ({ answer: [{ service: c.truth.service }] }));
    const none = await evaluate(ds, cases, async () => ({ answer: null }));
    const table = formatComparison(
      [
        { policy: 'right', summary: right },
        { policy: 'none', summary: none },
      ],
      right.levels,
    ).split('\n');
    const rows = (scope: string) => table.filter((l) => l.startsWith(`${scope} `));
    expect(rows('per fault by vote, service').map((l) => l.split(/\s+/)[5])).toEqual(['right', 'none']);
    expect(rows('per request, service')[0]).toMatch(/right\s+6\s+100\.00\s+100\.00\s+100\.00\s+100\.00\s+100\.00\s+1\.0000\s+1\.0000$/);
    expect(rows('per request, service')[1]).toMatch(/none\s+6\s+0\.00\s+0\.00\s+0\.00\s+0\.00\s+0\.00\s+0\.0000\s+0\.0000$/);
  });
});
