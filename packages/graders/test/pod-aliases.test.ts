/**
 * Pod aliases (episode.tool_settings.pod_aliases) through grading, on a real Nezha case: an
 * episode whose calls and answer name pods by the aliases the observations showed grades as the
 * same episode naming the real pods with aliases off, and both match the values of the paper's
 * equations computed by hand.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { loadDataset, ReplayPolicy, runEpisode, type Case, type Dataset, type EpisodeRecord, type Span } from '@thinkfl/env';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { toolCallText } from '../../../testkit/tool-calls';
import { gradeGroup } from '../src/index';
import { pathKey } from '../src/diversity/path-key';

let ds: Dataset;
let kase: Case;
let truth: Span;
let decoy: Span;

beforeAll(async () => {
  ds = await loadDataset(await ensureNezhaDataset());
  // A case with a span that calls the true root cause's pod, and one of another service whose
  // caller and siblings are not the true pod.
  for (const c of ds.cases) {
    const spans = ds.traces.trace(c.trace_id);
    const t = spans.find((s) => s.pod === c.truth.pod && s.parent_id);
    const nearTruth = (s: Span) => spans.some((x) => x.pod === c.truth.pod && (x.span_id === s.parent_id || x.parent_id === s.parent_id));
    const d = spans.find((s) => s.parent_id && s.service !== c.truth.service && !nearTruth(s));
    if (t && d) {
      [kase, truth, decoy] = [c, t, d];
      break;
    }
  }
  expect(kase).toBeDefined();
});

/**
 * Four tool steps (the first lists the true pod, the second the decoy's), then an answer ranking the decoy's pod first and the true pod second; `name`
 * is how the policy names a pod (its alias, or the pod itself).
 */
async function play(podAliases: boolean, name: (s: Span) => string): Promise<EpisodeRecord> {
  const ts = Math.round(kase.timestamp_us / 1e6);
  const rec = await runEpisode({
    dataset: ds,
    case: kase,
    settings: { d_max: 6, tool_settings: { pod_aliases: podAliases } },
    policy: new ReplayPolicy([
      toolCallText('search_traces', { parent_span_id: truth.parent_id }),
      toolCallText('search_traces', { parent_span_id: decoy.parent_id }),
      toolCallText('search_fluctuating_metrics', { service_name: name(decoy), timestamp: ts }),
      toolCallText('search_logs', { service_name: name(decoy), timestamp: ts }),
      toolCallText('print_results', { root_causes: [{ pod: name(decoy) }, { pod: name(truth) }] }),
    ]),
  });
  expect(rec.stop_reason).toBe('answered');
  return rec;
}

const grade = (rec: EpisodeRecord, composite: string) =>
  gradeGroup([rec], { truth: kase.truth, d_max: 6, podToService: (p) => ds.topology.serviceOfPod(p) }, composite);

describe('an answer naming pods by their aliases', () => {
  it('grades as the real pod names do with aliases off: Eq. 9, Eq. 8 and the reciprocal rank by hand', async () => {
    const alias = (s: Span) => `${s.service}-1`;
    const aliased = await play(true, alias);
    const plain = await play(false, (s) => s.pod);
    // The model read the aliases, never the pods, and wrote the aliases.
    const read = aliased.messages.filter((m) => m.role !== 'assistant').map((m) => m.content);
    expect(read.join('\n')).toContain(`pod=${alias(truth)}`);
    expect(read.join('\n')).toContain(`pod=${alias(decoy)}`);
    expect(ds.topology.pods.filter((p) => read.some((t) => t.includes(p.pod)))).toEqual([]);
    expect(aliased.messages.at(-1)!.role).toBe('tool');
    expect(aliased.answer).toEqual([{ pod: decoy.pod }, { pod: truth.pod }]);
    expect(aliased.answer).toEqual(plain.answer);
    expect(aliased.path).toEqual(plain.path);
    expect(pathKey(aliased.path)).toBe(pathKey(plain.path));

    // Eq. 9 (r_max 10), the truth at 0-based rank 1: R = 1 - 1/10.
    const stage1 = [await grade(aliased, 'stage1'), await grade(plain, 'stage1')];
    for (const g of stage1) expect(g.samples[0].graders.recall.score).toBeCloseTo(0.9, 12);
    // Eq. 8 = R + 0.2 P - 0.2 H: the truth last appears at step 1 of L = 4, mu = 2, so P = min(1/(4-2), 1) = 0.5;
    // both answered pods were shown and differ, so H = 0: S = 0.9 + 0.1 = 1.0.
    const stage3 = [await grade(aliased, 'stage3'), await grade(plain, 'stage3')];
    for (const g of stage3) {
      expect(g.samples[0].graders.multi_factor.parts).toEqual({ R: expect.closeTo(0.9, 12), P: 0.5, H: 0 });
      expect(g.totals[0]).toBeCloseTo(1.0, 12);
    }
    // MRR's term: the truth's service second among distinct services, 1/2.
    const rr = [await grade(aliased, 'reciprocal_rank'), await grade(plain, 'reciprocal_rank')];
    for (const g of rr) expect(g.totals[0]).toBe(0.5);
  });

  it('names no pod when the alias was never shown (aliases off): the answer misses the truth', async () => {
    const rec = await play(false, (s) => `${s.service}-1`);
    const g = await grade(rec, 'stage1');
    // Eq. 9: a missing root cause scores missing_score, 0 by default.
    expect(g.samples[0].graders.recall.score).toBe(0);
  });
});
