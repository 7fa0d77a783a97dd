/** The fault split of the real Nezha 2023-01-29 cases: no fault on both sides, deterministic, as configured. */
import { beforeAll, describe, expect, it } from 'vitest';
import { loadDataset, type Case } from '@thinkfl/env';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { splitCases } from '../src/sft/index';

let cases: Case[];
const faultsOf = (cs: Case[]) => new Set(cs.map((c) => c.fault_id));

beforeAll(async () => {
  cases = (await loadDataset(await ensureNezhaDataset())).cases;
});

describe('splitCases', () => {
  it('never puts a fault on both sides, for any seed', () => {
    for (let seed = 0; seed < 20; seed++) {
      const { train, eval: held } = splitCases(cases, { by: 'fault', eval_fraction: 0.3 }, seed);
      const trainFaults = faultsOf(train);
      for (const f of faultsOf(held)) expect(trainFaults.has(f)).toBe(false);
      expect(train.length + held.length).toBe(cases.length);
    }
  });

  it('holds out the configured share of faults, the same ones for the same seed whatever the order', () => {
    const all = faultsOf(cases).size;
    const a = splitCases(cases, { by: 'fault', eval_fraction: 0.3 }, 7);
    const b = splitCases([...cases].reverse(), { by: 'fault', eval_fraction: 0.3 }, 7);
    expect(faultsOf(a.eval).size).toBe(Math.round(0.3 * all));
    expect(faultsOf(b.eval)).toEqual(faultsOf(a.eval));
    const others = [1, 2, 3].map((seed) => [...faultsOf(splitCases(cases, { by: 'fault', eval_fraction: 0.3 }, seed).eval)].sort().join());
    expect(others.some((o) => o !== [...faultsOf(a.eval)].sort().join())).toBe(true);
  });

  it('uses the split seed over the run seed and keeps the input order on each side', () => {
    const a = splitCases(cases, { by: 'fault', eval_fraction: 0.3, seed: 4 }, 0);
    const b = splitCases(cases, { by: 'fault', eval_fraction: 0.3 }, 4);
    expect(a.eval.map((c) => c.id)).toEqual(b.eval.map((c) => c.id));
    const pos = new Map(cases.map((c, i) => [c.id, i]));
    const ascending = (cs: Case[]) => cs.every((c, i) => i === 0 || pos.get(c.id)! > pos.get(cs[i - 1].id)!);
    expect(ascending(a.train) && ascending(a.eval)).toBe(true);
  });

  it('splits by case when asked, and holds out nothing at fraction 0', () => {
    const byCase = splitCases(cases, { by: 'case', eval_fraction: 0.25 }, 0);
    expect(byCase.eval.length).toBe(Math.round(0.25 * cases.length));
    expect(splitCases(cases, { by: 'fault', eval_fraction: 0 }, 0).eval).toHaveLength(0);
  });

  it('keeps a fault on each side when there are only two', () => {
    const two = cases.filter((c) => [...faultsOf(cases)].slice(0, 2).includes(c.fault_id));
    const s = splitCases(two, { by: 'fault', eval_fraction: 0.9 }, 0);
    expect(faultsOf(s.train).size).toBe(1);
    expect(faultsOf(s.eval).size).toBe(1);
  });
});
