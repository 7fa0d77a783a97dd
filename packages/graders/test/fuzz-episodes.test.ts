/**
 * Acceptance: 10,000 random and malformed assistant messages go through parsing, the tools
 * and both protocols on real Nezha cases; no exception escapes and every episode gets a
 * finite grade from every composite.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import {
  loadDataset,
  protocolNames,
  runEpisode,
  type AssistantMessage,
  type Case,
  type Dataset,
  type EpisodeRecord,
  type Policy,
} from '@thinkfl/env';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { COMPOSITE_PRESETS, gradeGroup, MemoryDiversityCache } from '../src/index';
import { MessageFuzzer, type FuzzWorld } from './fuzz/messages';
import { prng } from '../../../testkit/prng';

const TOTAL = 10_000;
const GROUP = 4;

let ds: Dataset;
beforeAll(async () => {
  ds = await loadDataset(await ensureNezhaDataset());
});

function world(c: Case): FuzzWorld {
  return {
    spanIds: ds.traces.trace(c.trace_id).map((s) => s.span_id),
    services: ds.topology.services,
    pods: ds.topology.pods.map((p) => p.pod),
    nodes: ds.topology.nodes,
    timestampUs: c.timestamp_us,
  };
}

/** Hands out fuzzed messages until the budget is spent, then throws (a policy error). */
class FuzzPolicy implements Policy {
  readonly name = 'fuzz';
  used = 0;
  constructor(
    private readonly fuzzer: MessageFuzzer,
    private readonly budget: { left: number },
    private readonly w: FuzzWorld,
  ) {}
  async next(): Promise<AssistantMessage> {
    if (this.budget.left <= 0) throw new Error('fuzz budget spent');
    this.budget.left--;
    this.used++;
    return this.fuzzer.next(this.w);
  }
}

describe('episode fuzz', () => {
  it(`survives ${TOTAL} random and malformed messages and grades every episode`, async () => {
    const fuzzer = new MessageFuzzer(20230129);
    const pick = prng(7);
    const budget = { left: TOTAL };
    const diversity = new MemoryDiversityCache();
    const podToService = (pod: string) => ds.topology.serviceOfPod(pod);
    const stops = new Map<string, number>();
    const formats = new Set<string>();
    let episodes = 0;
    let graded = 0;
    while (budget.left > 0) {
      const c = ds.cases[Math.floor(pick() * ds.cases.length)];
      const protocol = protocolNames()[Math.floor(pick() * protocolNames().length)];
      const settings = {
        d_max: 1 + Math.floor(pick() * 10),
        rclagent: { initial_turns: 1 + Math.floor(pick() * 4), reflection_turns: 1 + Math.floor(pick() * 6) },
        tool_settings: { span_aliases: pick() < 0.3, max_observation_chars: 500 + Math.floor(pick() * 4000) },
      };
      const w = world(c);
      const group: EpisodeRecord[] = [];
      for (let g = 0; g < GROUP && budget.left > 0; g++) {
        const policy = new FuzzPolicy(fuzzer, budget, w);
        const ep = await runEpisode({ dataset: ds, case: c, policy, protocol, settings });
        episodes++;
        stops.set(ep.stop_reason, (stops.get(ep.stop_reason) ?? 0) + 1);
        expect(ep.turns).toHaveLength(ep.messages.filter((m) => m.role === 'assistant').length);
        expect(ep.turns.length).toBe(policy.used);
        expect(ep.parse_errors.length).toBe(ep.turns.filter((t) => !t.args_valid).length);
        expect(ep.answer === null).toBe(ep.stop_reason === 'no_answer' || ep.stop_reason === 'policy_error');
        for (const m of ep.messages) expect(typeof m.content).toBe('string');
        for (const call of ep.tool_calls)
          expect(call.observation.text.length).toBeLessThanOrEqual(settings.tool_settings.max_observation_chars + 200);
        for (const call of ep.tool_calls) formats.add(call.name);
        group.push(ep);
      }
      for (const [name, spec] of Object.entries(COMPOSITE_PRESETS)) {
        const grade = await gradeGroup(group, { truth: c.truth, podToService, d_max: settings.d_max, diversity }, spec);
        expect(grade.totals).toHaveLength(group.length);
        for (const t of grade.totals) expect(Number.isFinite(t), `${name} total ${t}`).toBe(true);
        for (const s of grade.samples) for (const term of Object.values(s.graders)) expect(Number.isFinite(term.score)).toBe(true);
        graded += group.length;
      }
    }
    expect(budget.left).toBe(0);
    expect(graded).toBe(episodes * Object.keys(COMPOSITE_PRESETS).length);
    // The generator reaches every outcome and every tool, so the run exercised them all.
    for (const s of ['answered', 'forced_answer', 'no_answer']) expect(stops.get(s) ?? 0).toBeGreaterThan(0);
    expect([...formats].sort()).toEqual(['print_results', 'search_fluctuating_metrics', 'search_logs', 'search_traces']);
    console.log(`fuzz: ${TOTAL} messages, ${episodes} episodes, stops ${JSON.stringify(Object.fromEntries(stops))}`);
  }, 600_000);
});
