/**
 * A run's evaluation report by fault type: episodes of real Nezha cases played by the expert
 * (well-formed) and by a policy that answers in prose (no tool call, so never format-valid),
 * scored by the env's evaluator; the report's validity per fault type is the share counted by
 * hand from which policy played which case.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import {
  createExpert,
  evaluate,
  ExpertSettingsSchema,
  loadDataset,
  runEpisode,
  type Case,
  type Dataset,
  type EpisodeRecord,
  type Policy,
} from '@thinkfl/env';
import { evalReport, formatEvalReport, type EvalReport } from '../src/controller/evaluation';
import { evalFigures } from '../src/logs/scalars';
import { ensureNezhaDataset } from '../../../testkit/nezha';

const prose: Policy = {
  name: 'prose',
  next: async () => ({ content: 'The root cause is most likely the checkout service; no tool is needed.' }),
};

let dataset: Dataset;
let typeA: string;
let typeB: string;
let report: EvalReport;
let played: Case[];
let episodes: EpisodeRecord[];
let result: Awaited<ReturnType<typeof evaluate>>;

beforeAll(async () => {
  dataset = await loadDataset(await ensureNezhaDataset());
  const typeOf = (c: Case) => dataset.faults.find((f) => f.id === c.fault_id)!.type;
  const a = dataset.cases[0];
  typeA = typeOf(a);
  const a2 = dataset.cases.find((c) => c !== a && typeOf(c) === typeA)!;
  const b = dataset.cases.find((c) => typeOf(c) !== typeA)!;
  typeB = typeOf(b);
  played = [a, a2, b];
  const expert = createExpert(dataset, ExpertSettingsSchema.parse({}));
  // a and b by the expert, a2 in prose: type A 1 of 2 valid, type B 1 of 1.
  episodes = [];
  for (const [c, policy] of [
    [a, expert],
    [a2, prose],
    [b, expert],
  ] as const) {
    episodes.push(await runEpisode({ dataset, case: c, policy }));
  }
  const byCase = new Map(episodes.map((e) => [e.case_id, e]));
  result = await evaluate(dataset, played, async (c) => ({ answer: byCase.get(c.id)!.answer, episode: byCase.get(c.id) }));
  report = evalReport('priming', 3, played.length, episodes, result);
}, 180_000);

describe('evaluation report', () => {
  it('gives format validity by fault type and per request', () => {
    expect(typeA).not.toBe(typeB);
    expect(report.format_valid).toBeCloseTo(2 / 3, 10);
    expect(report.format_valid_by_type).toEqual({
      [typeA]: { cases: 2, format_valid: 0.5 },
      [typeB]: { cases: 1, format_valid: 1 },
    });
    expect(report.requests.map((r) => [r.case_id, r.format_valid])).toEqual([
      [played[0].id, true],
      [played[1].id, false],
      [played[2].id, true],
    ]);
  });

  it('counts a request whose episode is missing as invalid', () => {
    const withoutB = evalReport('priming', 3, played.length, episodes.slice(0, 2), result);
    expect(withoutB.format_valid_by_type[typeB]).toEqual({ cases: 1, format_valid: 0 });
    expect(withoutB.requests[2].format_valid).toBe(false);
  });

  it('exposes the by-type figures to expect checks and prints them', () => {
    const figures = evalFigures(report);
    expect(figures[`format_valid_by_type/${typeA}`]).toBe(0.5);
    expect(figures[`format_valid_by_type/${typeB}`]).toBe(1);
    expect(formatEvalReport(report)).toContain(`${typeA} 0.50 (2)`);
  });

  it('reads an evaluation written before the by-type figures existed', () => {
    const { format_valid_by_type: _, ...older } = report;
    expect(Object.keys(evalFigures(older)).some((k) => k.startsWith('format_valid_by_type/'))).toBe(false);
    expect(evalFigures(older).format_valid).toBeCloseTo(2 / 3, 10);
  });
});
