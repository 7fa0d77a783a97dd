/**
 * Each kind of evidence of the scripted expert on real cases of Nezha 2023-01-29: the tool
 * calls are made against the real data, and each kind reads only what those calls returned.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { loadDataset, type LoadedDataset } from '../src/datasets';
import { gatherEvidence } from '../src/policies/expert/evidence';
import { errors } from '../src/policies/expert/kinds/errors';
import { evidenceKinds, type SuspectSettings } from '../src/policies/expert/kinds/kind';
import { carriesRequest, latency } from '../src/policies/expert/kinds/latency';
import { resources } from '../src/policies/expert/kinds/resources';
import { silence } from '../src/policies/expert/kinds/silence';
import { Toolbox } from '../src/tools';
import type { ToolCallRecord } from '../src/types';

let ds: LoadedDataset;
beforeAll(async () => {
  ds = await loadDataset(await ensureNezhaDataset());
});

const S: SuspectSettings = {
  slowZ: 3,
  fastRatio: 0.5,
  logRatio: 3,
  callerErrorWeight: 0.6,
  risenLogWeight: 0.5,
  silentLogWeight: 1.5,
  fastLeadWeight: 0.6,
  calmFastLeadBonus: 0.7,
};
const call = (name: string, args: Record<string, unknown>, turn = 0): ToolCallRecord => ({
  turn,
  name,
  arguments: args,
  observation: new Toolbox(ds).call(name, args),
});
const open = (ids: string[]): ToolCallRecord[] => ids.map((id, turn) => call('search_traces', { parent_span_id: id }, turn));

const ROUTE = 'ts-route-service-b6c59fb57-zv8dt';
// Route exception fault (10:56:45), a request whose delay runs 8 spans down to route (x18 there):
// gateway /*, its HTTP POST, travel trips/left, queryInfo, its HTTP POST to basic, basic travels,
// queryForTravels, its HTTP POST to route, route's byIds.
const ROUTE_PATH = [
  '7c96495c053bce87',
  'b075464ba2c1abe8',
  '0a3b3c74255077e6',
  '73ee85caca2b1eea',
  'ad9e74414fa1a9c6',
  '903dae36a4c2e94d',
  'e668e43a926415de',
  '32dd4b98d814c6c2',
  'bbc9579d7d4db844',
];

describe('kinds of evidence', () => {
  it('are registered once each, resources last (it confirms what the others blamed)', () => {
    const names = evidenceKinds().map((k) => k.name);
    expect([...names].sort()).toEqual(['errors', 'latency', 'resources', 'silence']);
    expect(names.at(-1)).toBe('resources');
  });
});

describe('latency', () => {
  it("blames the deep callee whose own time carries a request's delay", () => {
    const ev = gatherEvidence(open(ROUTE_PATH));
    const byPod = new Map<string, number>();
    for (const f of latency.findings(ev, S, new Map())) byPod.set(f.pod, (byPod.get(f.pod) ?? 0) + f.score);
    const ranked = [...byPod].sort((a, b) => b[1] - a[1]);
    expect(ranked[0][0]).toBe(ROUTE);
    // Opened only down to basic's call, the same delay is the call's: route is not yet in view.
    const partial = gatherEvidence(open(ROUTE_PATH.slice(0, 7)));
    expect(latency.findings(partial, S, new Map()).some((f) => f.pod === ROUTE)).toBe(false);
  });

  it('says which slow leads carry the whole excess of the request', () => {
    const ev = gatherEvidence(open(ROUTE_PATH.slice(0, 7)));
    // basic's HTTP POST to route: 329.6 ms against a usual 58.1 ms, more than the entry's 238.8 ms excess.
    expect(carriesRequest(ev, ev.spans.get('32dd4b98d814c6c2')!, 1, S.slowZ)).toBe(true);
    // Its sibling, the next HTTP POST (29.9 ms against 54.4 ms), is not slow at all.
    expect(carriesRequest(ev, ev.spans.get('e85bdc82e513df90')!, 1, S.slowZ)).toBe(false);
    // The travel server span (x1.50) carries the excess but is not slow.
    expect(carriesRequest(ev, ev.spans.get('0a3b3c74255077e6')!, 0.5, S.slowZ)).toBe(false);
  });

  it('leads into slow spans only', () => {
    const ev = gatherEvidence(open(ROUTE_PATH.slice(0, 7)));
    expect(latency.lead!(ev, ev.spans.get('32dd4b98d814c6c2')!, S)).toBeGreaterThan(1);
    expect(latency.lead!(ev, ev.spans.get('e85bdc82e513df90')!, S)).toBe(0);
  });
});

describe('errors', () => {
  it('blames the service whose error handler ran, more when nothing below it failed', () => {
    // Same fault, another request: travel's trips/left ran BasicErrorController.error.
    const ev = gatherEvidence(open(['79f2edb39099253e', '10229a6ced31462e', '5083e44ea2054e54']));
    const f = errors.findings(ev, S, new Map());
    const travel = f.filter((x) => x.service === 'ts-travel-service');
    expect(travel.some((x) => /error handler ran below/.test(x.reason))).toBe(true);
    expect(f.every((x) => x.service === 'ts-travel-service')).toBe(true);
    expect(errors.lead!(ev, ev.spans.get('5083e44ea2054e54')!, S)).toBeGreaterThanOrEqual(3);
  });

  it('adds the calm bonus to a cut-short call only when its caller is not slow', () => {
    // Basic exception fault (09:25): travel2's queryInfo (x0.84, not slow) made an HTTP POST of x0.32, its call that threw.
    const calm = gatherEvidence(open(['60abc69909fac917', '5e84b318513fd8a9', '9c1e2d92df9b2572', '6dba8e37949ee617']));
    const cut = calm.spans.get('075ba7c4220ad4a7')!;
    expect(cut.summary.ratio!).toBeLessThan(0.5);
    expect(errors.lead!(calm, cut, S) - errors.lead!(calm, cut, { ...S, calmFastLeadBonus: 0 })).toBeCloseTo(0.7, 9);
    // CPU contention (13:32): preserve-other's handler is x2.52 slow; its fast last call (x0.30) gets no bonus.
    const slow = gatherEvidence(open(['f77dd5e7976d87dc', '07440a3c820ff02f', 'b99ef5d6f1083639', 'e2de317e51db1f09']));
    const noise = slow.spans.get('5e8f048bf2a178de')!;
    expect(noise.summary.ratio!).toBeLessThan(0.5);
    expect(errors.lead!(slow, noise, S)).toBeCloseTo(0.6, 9);
  });
});

describe('silence', () => {
  // search_logs on node 33.33.33.80 during the route exception fault: route's queryByIds line stopped.
  const survey = () =>
    gatherEvidence([call('search_logs', { service_name: '33.33.33.80', timestamp: Date.UTC(2023, 0, 29, 10, 57, 40) / 1000 })]);

  it('blames each pod whose usual statements went silent, with its weight', () => {
    const f = silence.findings(survey(), S, new Map());
    const route = f.find((x) => x.pod === ROUTE)!;
    expect(route.score).toBe(1.5);
    expect(route.reason).toMatch(/usually writes went silent/);
  });

  it('says nothing with weight 0 (the tiny teacher)', () => {
    expect(silence.findings(survey(), { ...S, silentLogWeight: 0 }, new Map())).toEqual([]);
  });
});

describe('resources', () => {
  // CPU contention of food (14:49:57): the faulty pod's CPU and latency series leave their band.
  const FOOD = 'ts-food-service-f5756978c-k8vqf';
  const checked = () => gatherEvidence([call('search_fluctuating_metrics', { service_name: FOOD, timestamp: 1675003805 })]);

  it('confirms a suspect whose own series left their band, up to a cap', () => {
    const f = resources.findings(checked(), S, new Map([[FOOD, 'ts-food-service']]));
    expect(f).toHaveLength(1);
    expect(f[0].score).toBeCloseTo(0.6, 9);
    expect(f[0].reason).toMatch(/CpuUsage/);
  });

  it('blames no pod that the other kinds did not blame', () => {
    expect(resources.findings(checked(), S, new Map())).toEqual([]);
  });
});
