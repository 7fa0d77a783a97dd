/**
 * The expert's regression table: its per-fault figures on every case of the shipped day, pinned
 * in expert-regression.json. A change that moves any fault fails here until the same commit
 * rewrites the table (`npx tsx scripts/policy-table.ts --regression packages/env/test/expert-regression.json`)
 * and says why in its message. Also the floors of issue 27 against aa41d73's expert, whose
 * figures were played by aa41d73's own code (expert-regression-aa41d73.json).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { loadDataset, type LoadedDataset } from '../src/datasets';
import { runEpisode } from '../src/episodes';
import { evaluate, type EvalResult } from '../src/eval';
import { createExpert, ExpertSettingsSchema } from '../src/policies';
import { evidenceKinds, type EvidenceKind } from '../src/policies/expert/kinds/kind';
import { compareRows, type FaultRow, faultRows, faultTypes, outcomesOf, summarizeRows } from '../src/eval/fault-table';

const pinned = (file: string): FaultRow[] => JSON.parse(readFileSync(join(import.meta.dirname, file), 'utf8')).faults;
const TABLE = pinned('expert-regression.json');
const AA41D73 = pinned('expert-regression-aa41d73.json');

let ds: LoadedDataset;
let result: EvalResult;
let rows: FaultRow[];

async function play(
  settings: Record<string, unknown> = {},
  kinds: readonly EvidenceKind[] = evidenceKinds(),
): Promise<{ r: EvalResult; rows: FaultRow[] }> {
  const expert = createExpert(ds, ExpertSettingsSchema.parse(settings), kinds);
  const r = await evaluate(ds, ds.cases, async (c) => {
    const ep = await runEpisode({ dataset: ds, case: c, policy: expert, protocol: 'rot', settings: { d_max: 10 } });
    return { answer: ep.answer, episode: ep };
  });
  const o = outcomesOf(r);
  return { r, rows: faultRows(o.faults, o.requests) };
}

beforeAll(async () => {
  ds = await loadDataset(await ensureNezhaDataset());
  ({ r: result, rows } = await play());
});

describe("the expert's regression table on Nezha 2023-01-29", () => {
  it('pins every fault of the day that has cases', () => {
    expect(TABLE.map((r) => r.faultId).sort()).toEqual([...new Set(ds.cases.map((c) => c.fault_id))].sort());
    expect(TABLE.reduce((a, r) => a + r.requests, 0)).toBe(ds.cases.length);
  });

  it("matches the expert's figures now, fault by fault", () => {
    const { lowered, raised } = compareRows(TABLE, rows);
    expect(lowered, 'faults the expert now ranks worse than the table').toEqual([]);
    expect(raised, 'faults the expert now ranks better: rewrite the table in the same commit').toEqual([]);
  });

  it("sums to the evaluation's own per-fault and per-request figures", () => {
    const s = summarizeRows(rows);
    expect(s.best).toBeCloseTo(result.per_fault.service!.mrr, 9);
    expect(s.vote).toBeCloseTo(result.per_fault_vote!.service!.mrr, 9);
    // Request MRRs are pinned to 3 decimals.
    expect(Math.abs(s.request - result.per_request.service!.mrr)).toBeLessThan(5e-4);
    expect(s.requestR10).toBeCloseTo(result.per_request.service!.recall[10], 9);
    expect(s.batch).toBeCloseTo(result.per_batch_vote!.service!.mrr, 9);
  });

  it('fails on a deliberate one-line regression: the silence kind left out of the registry', async () => {
    // The one line: evidenceKinds() -> evidenceKinds().filter((k) => k.name !== 'silence').
    const broken = await play(
      {},
      evidenceKinds().filter((k) => k.name !== 'silence'),
    );
    const { lowered } = compareRows(TABLE, broken.rows);
    expect(lowered.length).toBeGreaterThan(0);
  });

  it('fails on a deliberate one-line regression: checks that interrupt a slow descent, losing the route faults', async () => {
    // The one line: slow_path_share 1 -> null (a check may take the turns of the descent).
    const broken = await play({ slow_path_share: null });
    const { lowered } = compareRows(TABLE, broken.rows);
    const routeFirst = TABLE.filter((r) => r.service === 'ts-route-service' && r.best === 0).map((r) => `${r.faultId} best rank 0 -> null`);
    expect(routeFirst.length).toBeGreaterThan(0);
    expect(lowered).toEqual(expect.arrayContaining(routeFirst));
  });
});

describe("issue 27's floors against aa41d73's expert", () => {
  it('still ranks first, by its best request, every fault that aa41d73 ranked first', () => {
    const lost = AA41D73.filter((b) => b.best === 0 && rows.find((r) => r.faultId === b.faultId)?.best !== 0).map((b) => b.faultId);
    expect(lost).toEqual([]);
  });

  it('is below aa41d73 on no fault type, by best request, by vote or per request', () => {
    for (const type of faultTypes(AA41D73)) {
      const then = summarizeRows(AA41D73.filter((r) => r.type === type));
      const now = summarizeRows(rows.filter((r) => r.type === type));
      expect(now.best, `${type} best`).toBeGreaterThanOrEqual(then.best);
      expect(now.vote, `${type} vote`).toBeGreaterThanOrEqual(then.vote);
      expect(now.request, `${type} request`).toBeGreaterThanOrEqual(then.request);
    }
  });
});
