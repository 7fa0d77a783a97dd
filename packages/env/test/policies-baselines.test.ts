import { beforeAll, describe, expect, it } from 'vitest';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { loadDataset, type LoadedDataset } from '../src/datasets';
import { spreadCases } from '../src/eval';
import {
  createMicroRankRanker,
  createSelfTimeRanker,
  endpointSpan,
  getPolicy,
  MicroRankSettingsSchema,
  parsePolicySettings,
  personalizedPageRank,
  selfTimeUs,
  SelfTimeSettingsSchema,
  TraceTimeIndex,
} from '../src/policies';
import type { Case, RootCause } from '../src/types';

let ds: LoadedDataset;
let cases: Case[];

beforeAll(async () => {
  ds = await loadDataset(await ensureNezhaDataset());
  cases = spreadCases(ds.cases, 8);
});

function expectWellFormed(answer: RootCause[], max: number): void {
  expect(answer.length).toBeGreaterThan(0);
  expect(answer.length).toBeLessThanOrEqual(max);
  const pods = answer.map((a) => a.pod);
  expect(new Set(pods).size).toBe(pods.length);
  for (const a of answer) {
    expect(ds.topology.serviceOfPod(a.pod!)).toBe(a.service);
    expect(a.reason).toBeTruthy();
  }
}

describe('span arithmetic on real traces', () => {
  it('self time is the duration less the union of the children, within [0, duration]', () => {
    const spans = ds.traces.trace(cases[0].trace_id);
    expect(spans.length).toBeGreaterThan(5);
    for (const s of spans) {
      const kids = ds.traces.children(s.span_id);
      const self = selfTimeUs(s, kids);
      expect(self).toBeGreaterThanOrEqual(0);
      expect(self).toBeLessThanOrEqual(s.duration_us);
      if (kids.length === 0) expect(self).toBe(s.duration_us);
      // Counting each child alone can only subtract more than the union does.
      const sum = kids.reduce(
        (a, k) => a + Math.max(0, Math.min(k.start_us + k.duration_us, s.start_us + s.duration_us) - Math.max(k.start_us, s.start_us)),
        0,
      );
      expect(self).toBeGreaterThanOrEqual(s.duration_us - sum - 1e-6);
    }
  });

  it('a span run twice in parallel with itself is not subtracted twice', () => {
    const parent = ds.traces.trace(cases[0].trace_id).find((s) => ds.traces.children(s.span_id).length === 1)!;
    const [kid] = ds.traces.children(parent.span_id);
    expect(selfTimeUs(parent, [kid, kid])).toBe(selfTimeUs(parent, [kid]));
  });

  it('the time index returns exactly the traces whose entry starts in the window', () => {
    const index = new TraceTimeIndex(ds.traces);
    const t = cases[0].timestamp_us;
    const got = new Set(index.between(t - 5e6, t + 5e6));
    let expected = 0;
    for (const id of ds.traces.traceIds()) {
      const e = ds.traces.entry(id)!;
      const inside = e.start_us >= t - 5e6 && e.start_us <= t + 5e6;
      expect(got.has(id)).toBe(inside);
      if (inside) expected++;
    }
    expect(got.size).toBe(expected);
    expect(got.has(cases[0].trace_id)).toBe(true);
  });

  it('the endpoint span is the first call out of the gateway', () => {
    const e = endpointSpan(ds.traces, cases[0].trace_id)!;
    expect(e.service).not.toBe('ts-gateway-service');
    expect(ds.traces.span(e.parent_id!)!.service).toBe('ts-gateway-service');
  });
});

describe('personalised PageRank', () => {
  it('puts weight on operations many traces cover and on callees, and sums to at most 1', () => {
    // op 0 calls op 1; every trace covers op 1, one covers op 0 too, one covers op 2.
    const r = personalizedPageRank({ ops: 3, calls: [[0, 1]], coverage: [[0, 1], [1], [1, 2]] });
    expect(r[1]).toBeGreaterThan(r[0]);
    expect(r[1]).toBeGreaterThan(r[2]);
    expect(r.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(1 + 1e-9);
  });
});

describe('selftime baseline', () => {
  it('ranks the pods of the case trace, well formed', () => {
    const ranker = createSelfTimeRanker(ds, SelfTimeSettingsSchema.parse({}));
    for (const c of cases) {
      const answer = ranker.rank(c);
      expectWellFormed(answer, 10);
      const pods = new Set(ds.traces.trace(c.trace_id).map((s) => s.pod));
      for (const a of answer) expect(pods.has(a.pod!)).toBe(true);
    }
  });

  it('without the baseline, puts first the pod with the largest total self time', () => {
    const ranker = createSelfTimeRanker(ds, SelfTimeSettingsSchema.parse({ relative_to_baseline: false }));
    for (const c of cases.slice(0, 4)) {
      const total = new Map<string, number>();
      for (const s of ds.traces.trace(c.trace_id)) total.set(s.pod, (total.get(s.pod) ?? 0) + selfTimeUs(s, ds.traces.children(s.span_id)));
      const best = Math.max(...total.values());
      expect(total.get(ranker.rank(c)[0].pod!)).toBe(best);
    }
  });

  it('honours max_answers', () => {
    const ranker = createSelfTimeRanker(ds, SelfTimeSettingsSchema.parse({ max_answers: 2 }));
    expect(ranker.rank(cases[0]).length).toBeLessThanOrEqual(2);
  });
});

describe('microrank baseline', () => {
  it('ranks pods seen around the case, well formed and deterministic', () => {
    const ranker = createMicroRankRanker(ds, MicroRankSettingsSchema.parse({ max_traces: 100 }));
    for (const c of cases.slice(0, 4)) {
      const answer = ranker.rank(c);
      expectWellFormed(answer, 10);
      expect(answer[0].reason).toMatch(/anomalous vs \d+ normal requests/);
      expect(ranker.rank(c)).toEqual(answer);
    }
  });

  it('only ranks pods covered by the case trace or an anomalous neighbour', () => {
    const ranker = createMicroRankRanker(ds, MicroRankSettingsSchema.parse({ window_s: 0.000001 }));
    const c = cases[0];
    const pods = new Set(ds.traces.trace(c.trace_id).map((s) => s.pod));
    for (const a of ranker.rank(c)) expect(pods.has(a.pod!)).toBe(true);
  });
});

describe('policy registry', () => {
  it('knows the baselines and the expert, and names the YAML path of a bad setting', () => {
    expect(getPolicy('selftime').kind).toBe('ranker');
    expect(getPolicy('microrank').kind).toBe('ranker');
    expect(getPolicy('expert').kind).toBe('agent');
    expect(() => getPolicy('oracle')).toThrow(/unknown policy "oracle"; known: .*expert/);
    expect(() => parsePolicySettings(getPolicy('microrank'), { damping: 2 })).toThrow(/policies\.microrank\.damping/);
    // Settings written before issue 28's snake_case rename are refused, not silently dropped to the defaults.
    expect(() => parsePolicySettings(getPolicy('microrank'), { windowS: 30, maxTraces: 50 })).toThrow(
      'invalid settings of policy microrank: policies.microrank.windowS: renamed: write window_s (keys are snake_case); ' +
        'policies.microrank.maxTraces: renamed: write max_traces (keys are snake_case)',
    );
    expect(() => parsePolicySettings(getPolicy('selftime'), { relativeToBaseline: false })).toThrow(
      'policies.selftime.relativeToBaseline: renamed: write relative_to_baseline (keys are snake_case)',
    );
  });
});
