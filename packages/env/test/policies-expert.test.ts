import { beforeAll, describe, expect, it } from 'vitest';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { loadDataset, type LoadedDataset } from '../src/datasets';
import { runEpisode } from '../src/episodes';
import { spreadCases } from '../src/eval';
import { createExpert, ExpertSettingsSchema } from '../src/policies';
import { gatherEvidence } from '../src/policies/expert/evidence';
import { rankSuspects } from '../src/policies/expert/decide';
import { Toolbox, type SearchTracesData } from '../src/tools';
import type { Case, EpisodeRecord, ToolCallRecord } from '../src/types';

let ds: LoadedDataset;
let cases: Case[];

beforeAll(async () => {
  ds = await loadDataset(await ensureNezhaDataset());
  cases = spreadCases(ds.cases, 6);
});

async function play(c: Case, settings: Record<string, unknown> = {}, dMax = 10): Promise<EpisodeRecord> {
  const { tool_settings = {}, ...expertSettings } = settings;
  const expert = createExpert(ds, ExpertSettingsSchema.parse(expertSettings));
  return runEpisode({ dataset: ds, case: c, policy: expert, protocol: 'rot', settings: { d_max: dMax, tool_settings } });
}

describe('scripted expert on real cases', () => {
  it('answers within D_max with well-formed Hermes calls and a ranked list of known pods', async () => {
    for (const c of cases) {
      const ep = await play(c);
      expect(ep.stop_reason).toBe('answered');
      expect(ep.parse_errors).toEqual([]);
      expect(ep.turns.every((t) => t.parsed && t.offered_tool && t.args_valid)).toBe(true);
      expect(ep.path.length).toBeLessThanOrEqual(10);
      expect(ep.answer!.length).toBeGreaterThan(1);
      expect(ep.answer!.length).toBeLessThanOrEqual(5);
      for (const r of ep.answer!) expect(ds.topology.serviceOfPod(r.pod!)).toBe(r.service);
      for (const m of ep.messages.filter((x) => x.role === 'assistant')) {
        // A reasoning sentence, then exactly one call.
        expect(m.content).toMatch(/^[^<]{20,}\n<tool_call>\n\{.*\}\n<\/tool_call>$/s);
      }
    }
  });

  it('starts at the entry span and only opens spans it has been shown', async () => {
    const ep = await play(cases[0]);
    const first = ep.tool_calls[0];
    expect(first.name).toBe('search_traces');
    expect(first.arguments).toEqual({ parent_span_id: cases[0].entry_span_id });
    const seen = new Set<string>([cases[0].entry_span_id]);
    for (const call of ep.tool_calls.filter((t) => t.name === 'search_traces')) {
      expect(seen.has((call.arguments as { parent_span_id: string }).parent_span_id)).toBe(true);
      expect(call.observation.ok).toBe(true);
      for (const child of (call.observation.data as SearchTracesData).children) seen.add(child.span_id);
    }
  });

  it('descends into the trace and checks logs or metrics of a suspect before answering', async () => {
    const ep = await play(cases[1]);
    const names = ep.tool_calls.map((t) => t.name);
    expect(names.filter((n) => n === 'search_traces').length).toBeGreaterThanOrEqual(3);
    expect(names.some((n) => n === 'search_logs' || n === 'search_fluctuating_metrics')).toBe(true);
    const checked = ep.tool_calls.filter((t) => t.name === 'search_logs' || t.name === 'search_fluctuating_metrics');
    // What it checked is a node the request ran on (the log survey) or something it suspects.
    const nodes = new Set(
      ep.tool_calls
        .filter((t) => t.name === 'search_traces')
        .flatMap((t) => t.observation.components.filter((c) => ds.topology.nodes.includes(c))),
    );
    for (const c of checked) {
      const target = (c.arguments as { service_name: string }).service_name;
      expect(nodes.has(target) || ep.answer!.some((r) => r.service === target || r.pod === target)).toBe(true);
    }
    // The answer's leader is a pod whose evidence the expert saw: on the opened path or named by a log check.
    const seen = new Set(ep.tool_calls.filter((t) => t.name !== 'print_results').flatMap((t) => t.observation.components));
    expect(seen.has(ep.answer![0].pod!)).toBe(true);
  });

  it('never reads the ground truth: a different truth gives the same conversation', async () => {
    for (const c of cases.slice(0, 3)) {
      const a = await play(c);
      const b = await play({ ...c, truth: { level: 'service', service: 'ts-not-a-service' } });
      expect(b.messages.map((m) => m.content)).toEqual(a.messages.map((m) => m.content));
    }
  });

  it('respects a small D_max and still answers on its own', async () => {
    const ep = await play(cases[2], {}, 3);
    expect(ep.stop_reason).toBe('answered');
    expect(ep.path.length).toBeLessThanOrEqual(2);
  });

  it('uses the span aliases the prompt shows when aliases are on', async () => {
    const ep = await play(cases[3], { tool_settings: { span_aliases: true } });
    expect(ep.stop_reason).toBe('answered');
    const ids = ep.tool_calls
      .filter((t) => t.name === 'search_traces')
      .map((t) => (t.arguments as { parent_span_id: string }).parent_span_id);
    expect(ids[0]).toBe('s1');
    for (const id of ids) expect(id).toMatch(/^s\d+$/);
  });

  it('puts a pod whose usual log statements went silent first, by the weight its setting gives', () => {
    // search_logs on node 33.33.33.80 during the route exception fault (10:56:45): route's queryByIds line stopped.
    const tUs = Date.UTC(2023, 0, 29, 10, 57, 40) * 1000;
    const args = { service_name: '33.33.33.80', timestamp: tUs };
    const call: ToolCallRecord = { turn: 0, name: 'search_logs', arguments: args, observation: new Toolbox(ds).call('search_logs', args) };
    const ev = gatherEvidence([call]);
    const base = {
      slowZ: 3,
      fastRatio: 0.5,
      logRatio: 3,
      callerErrorWeight: 0.6,
      risenLogWeight: 0.5,
      fastLeadWeight: 0.6,
      calmFastLeadBonus: 0,
    };
    const silentPods = new Set(ev.logs.get('33.33.33.80')!.silent.flatMap((x) => x.pods));
    expect(silentPods.has('ts-route-service-b6c59fb57-zv8dt')).toBe(true);
    const ranked = rankSuspects(ev, { ...base, silentLogWeight: 1.5 });
    const route = ranked.find((x) => x.pod === 'ts-route-service-b6c59fb57-zv8dt')!;
    expect(route.score).toBeGreaterThanOrEqual(1.5);
    expect(route.reasons[0]).toMatch(/usually writes went silent/);
    expect(ranked.slice(0, silentPods.size).every((x) => silentPods.has(x.pod))).toBe(true);
    const off = rankSuspects(ev, { ...base, silentLogWeight: 0 }).find((x) => x.pod === 'ts-route-service-b6c59fb57-zv8dt');
    expect(off?.score ?? 0).toBeCloseTo(route.score - 1.5, 9);
  });

  it('keeps no turn for checks while a slow lead carries the request, so a deep callee is reached', async () => {
    // Route exception fault (10:56:45): this request's delay runs 8 spans down to route (x18 there).
    const c = ds.cases.find((x) => x.entry_span_id === '7c96495c053bce87')!;
    const descent = await play(c);
    expect(descent.tool_calls.filter((t) => t.name === 'search_traces').length).toBe(9);
    expect(descent.answer![0].pod).toBe('ts-route-service-b6c59fb57-zv8dt');
    // With the rule off, the checks of the log survey take three of those turns and route is never seen.
    const interrupted = await play(c, { slow_path_share: null });
    expect(interrupted.tool_calls.filter((t) => t.name === 'search_logs').length).toBeGreaterThan(0);
    expect(interrupted.answer!.some((r) => r.service === 'ts-route-service')).toBe(false);
  });
});
