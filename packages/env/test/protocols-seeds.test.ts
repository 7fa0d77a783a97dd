/** The seed systems' protocols and scripted stand-ins on the real Nezha data. */
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { loadDataset } from '../src/datasets/index';
import { binOf, buildSketch, parseEpisodeSettings, parseRootTag, runEpisode, sketchId } from '../src/episodes/index';
import { getPolicy, parsePolicySettings } from '../src/policies/index';
import type { Case, Dataset } from '../src/types';

let ds: Dataset;
let kase: Case;

beforeAll(async () => {
  ds = await loadDataset(await ensureNezhaDataset());
  kase = ds.cases[0];
});

const agent = (name: string) => {
  const def = getPolicy(name);
  if (def.kind !== 'agent') throw new Error(`${name} is no agent`);
  return { policy: def.create(ds, parsePolicySettings(def, {})), protocol: def.protocol! };
};

describe('oracl sketch and <root> parsing', () => {
  it('bins deviations Low / Medium / High at 1 and 3 sigma', () => {
    const s = parseEpisodeSettings({}).oracl;
    expect([binOf(0.99, s), binOf(-1, s), binOf(2.99, s), binOf(-3, s), binOf(40, s)]).toEqual(['Low', 'Medium', 'Medium', 'High', 'High']);
    expect([sketchId(1), sketchId(10), sketchId(11)]).toEqual(['①', '⑩', '(11)']);
  });

  it("describes every pod of the case's trace once, with the calls between pods", () => {
    const settings = parseEpisodeSettings({});
    const sk = buildSketch(ds, kase, settings.tool_settings, settings.oracl);
    const spans = ds.traces.trace(kase.trace_id);
    const pods = new Set(spans.map((s) => s.pod));
    expect(sk.pods.length + sk.omitted).toBe(pods.size);
    expect(sk.pods.reduce((n, p) => n + p.spans, 0)).toBe(spans.filter((s) => sk.pods.some((p) => p.pod === s.pod)).length);
    // Calls counted by hand: spans whose parent runs on another pod.
    const cross = spans.filter((s) => s.parent_id !== null && ds.traces.span(s.parent_id)!.pod !== s.pod).length;
    expect(sk.edges.reduce((n, e) => n + e.calls, 0)).toBe(cross);
  });

  it('reads causes in the accepted forms', () => {
    const pod = kase.truth.pod!;
    const svc = kase.truth.service!;
    expect(parseRootTag(`x <root>\n1. ${pod} | exception\n${svc}: return\n</root>`, ds.topology)).toEqual({
      ok: true,
      answer: [
        { service: svc, pod, type: 'exception' },
        { service: svc, type: 'return' },
      ],
    });
    expect(parseRootTag(`<root>${svc} (cpu_contention); nowhere-service</root>`, ds.topology)).toEqual({
      ok: true,
      answer: [{ service: svc, type: 'cpu_contention' }, { service: 'nowhere-service' }],
    });
    expect(parseRootTag(`<root>[{"pod": "${pod}", "type": "return"}]</root>`, ds.topology)).toEqual({
      ok: true,
      answer: [{ service: svc, pod, type: 'return' }],
    });
    expect(parseRootTag('<root> </root>', ds.topology)).toEqual({ ok: false, error: 'the <root> tag is empty' });
  });

  it('oracl-script plays its protocol from the sketch alone and gives a well-tagged answer', async () => {
    const { policy, protocol } = agent('oracl-script');
    expect(protocol).toBe('oracl');
    const ep = await runEpisode({ dataset: ds, case: kase, policy, protocol });
    expect(ep.stop_reason).toBe('answered');
    expect(ep.answer!.length).toBeGreaterThan(0);
    expect(ep.answer!.every((r) => r.pod && r.type)).toBe(true);
    expect(ep.messages[2].content).toMatch(
      /^<think>\(templated\)[\s\S]*<\/think>\n<Fault>[\s\S]*<\/Fault>\n<Counterfactual>[\s\S]*<\/Counterfactual>\n<root>[\s\S]+<\/root>$/,
    );
  });
});

describe('rclagent-script', () => {
  it('plays the three phases: trace only, deeper then metrics, final union', async () => {
    const { policy, protocol } = agent('rclagent-script');
    expect(protocol).toBe('rclagent');
    const ep = await runEpisode({ dataset: ds, case: kase, policy, protocol });
    expect(ep.stop_reason).toBe('answered');
    expect(ep.parse_errors).toEqual([]);
    const answers = ep.tool_calls.filter((c) => c.name === 'print_results');
    expect(answers).toHaveLength(3);
    const phase1 = ep.tool_calls.filter((c) => c.turn < answers[0].turn);
    expect(phase1.every((c) => c.name === 'search_traces')).toBe(true);
    expect(ep.tool_calls.some((c) => c.name === 'search_fluctuating_metrics' && c.turn > answers[0].turn)).toBe(true);
    // The final answer is R1 then R0 (Eq. 8).
    const r = (i: number) => (answers[i].observation.data as { answer: { pod?: string }[] }).answer.map((x) => x.pod);
    expect(ep.answer!.map((x) => x.pod)).toEqual([...new Set([...r(1), ...r(0)])].slice(0, 5));
  });
});

describe('knowledgemind-script and rcaflow-script', () => {
  it('knowledgemind-script answers the end of the most-visited path with top-3 types', async () => {
    const { policy, protocol } = agent('knowledgemind-script');
    const ep = await runEpisode({ dataset: ds, case: kase, policy, protocol });
    expect(ep.stop_reason).toBe('answered');
    expect(ep.parse_errors).toEqual([]);
    expect(new Set(ep.answer!.map((r) => r.service)).size).toBe(1);
    expect(ep.answer!.map((r) => r.type)).toHaveLength(3);
  });

  it('rcaflow-script follows the workflow and answers with reason and time', async () => {
    const { policy, protocol } = agent('rcaflow-script');
    const ep = await runEpisode({ dataset: ds, case: kase, policy, protocol });
    expect(ep.stop_reason).toBe('answered');
    expect(ep.parse_errors).toEqual([]);
    expect(ep.answer!.every((r) => /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/.test(r.time ?? ''))).toBe(true);
    expect(ep.tool_calls.some((c) => c.name === 'report_confidence')).toBe(true);
  });
});
