import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { loadDataset, loadRedeployedDataset, redeployPodNames, type LoadedDataset, type RedeployedDataset } from '../src/datasets/index';
import { spreadCases } from '../src/eval/index';
import { runEpisode } from '../src/episodes/index';
import { createExpert, ExpertSettingsSchema } from '../src/policies/index';
import { Toolbox, type PrintResultsData, type SearchTracesData } from '../src/tools/index';

let dir: string;
let ds: LoadedDataset;
let re: RedeployedDataset;

beforeAll(async () => {
  dir = await ensureNezhaDataset();
  ds = await loadDataset(dir);
  re = await loadRedeployedDataset(dir, 7);
}, 300_000);

describe('a simulated redeploy (every pod re-hashed consistently)', () => {
  it('renames every pod as Kubernetes renames a re-created one, and leaves no old pod name in any part', () => {
    const old = ds.topology.pods.map((p) => p.pod);
    expect(re.podNames.size).toBe(old.length);
    for (const p of ds.topology.pods) {
      const now = re.podNames.get(p.pod)!;
      // Same deployment and ReplicaSet hash, a new 5-character suffix from Kubernetes' alphabet.
      expect(now.slice(0, -5)).toBe(p.pod.slice(0, -5));
      expect(now.slice(-5)).toMatch(/^[bcdfghjklmnpqrstvwxz2456789]{5}$/);
      expect(now).not.toBe(p.pod);
    }
    expect(new Set(re.podNames.values()).size).toBe(old.length);
    expect(re.topology.pods.map((p) => ({ ...p, pod: p.pod }))).toEqual(
      ds.topology.pods.map((p) => ({ ...p, pod: re.podNames.get(p.pod)! })),
    );
    // The raw files hold the old names; nothing loaded from them does any more.
    const truthPod = ds.cases[0].truth.pod!;
    expect(readFileSync(join(dir, 'cases.json'), 'utf8').includes(truthPod)).toBe(true);
    const loaded = JSON.stringify([re.topology.pods, re.cases, re.faults]);
    expect(old.filter((pod) => loaded.includes(pod))).toEqual([]);
    expect(re.cases.map((c) => c.id)).toEqual(ds.cases.map((c) => c.id));
    for (const [i, c] of re.cases.entries()) {
      const was = ds.cases[i].truth;
      expect(c.truth).toEqual(was.pod ? { ...was, pod: re.podNames.get(was.pod) } : was);
    }
    // Spans, metrics and logs carry the new names.
    const c = ds.cases[0];
    const before = ds.traces.trace(c.trace_id);
    const after = re.traces.trace(c.trace_id);
    expect(after.map((s) => s.pod)).toEqual(before.map((s) => re.podNames.get(s.pod) ?? s.pod));
    const pod = ds.topology.pods.find((p) => ds.metrics.series(p.pod).length > 0)!.pod;
    expect(re.metrics.series(re.podNames.get(pod)!).map((s) => s.values)).toEqual(ds.metrics.series(pod).map((s) => s.values));
    expect(re.metrics.series(pod)).toEqual([]);
  });

  it('is deterministic in its seed, and another seed gives other names', () => {
    const taken = [...ds.topology.services, ...ds.topology.nodes];
    const pods = ds.topology.pods.map((p) => p.pod);
    expect([...redeployPodNames(pods, 7, taken)]).toEqual([...re.podNames]);
    const other = redeployPodNames(pods, 8, taken);
    expect([...other].filter(([pod, name]) => name !== re.podNames.get(pod)).length).toBeGreaterThan(other.size / 2);
  });
});

describe('pod aliases', () => {
  it("show a pod as its service and place among that service's pods, and the tools take the alias", () => {
    const c = ds.cases[0];
    const tb = new Toolbox(ds, { span_aliases: true, pod_aliases: true });
    const o = tb.call('search_traces', { parent_span_id: tb.spanRef(c.entry_span_id) });
    const d = o.data as SearchTracesData;
    const pods = [...new Set(d.children.map((k) => k.pod))];
    expect(pods.length).toBeGreaterThan(0);
    expect(ds.topology.pods.filter((p) => o.text.includes(p.pod))).toEqual([]);
    const first = d.children[0];
    const alias = `${first.service}-1`;
    expect(o.text).toContain(`pod=${alias}`);
    // The alias reaches the same data as the pod's own name.
    const ts = Math.round(c.timestamp_us / 1e6);
    const viaAlias = tb.call('search_fluctuating_metrics', { service_name: alias, timestamp: ts });
    const viaName = new Toolbox(ds).call('search_fluctuating_metrics', { service_name: first.pod, timestamp: ts });
    expect(viaAlias.data).toEqual(viaName.data);
    const answer = tb.call('print_results', { root_causes: [{ pod: alias }] });
    expect((answer.data as PrintResultsData).answer).toEqual([{ pod: first.pod }]);
    expect(answer.text).toContain(alias);
    expect(answer.text).not.toContain(first.pod);
    // Off by default: the pod's own name, as before.
    const plain = new Toolbox(ds, { span_aliases: true });
    expect(plain.call('search_traces', { parent_span_id: plain.spanRef(c.entry_span_id) }).text).toContain(`pod=${first.pod}`);
  });

  it('make a redeployed dataset read the same as the original: same messages, the same answer under the new names', async () => {
    const expert = () => createExpert(ds, ExpertSettingsSchema.parse({}));
    const cases = spreadCases(ds.cases, 12);
    const settings = (pod_aliases: boolean) => ({ d_max: 6, tool_settings: { span_aliases: true, verdicts: true, pod_aliases } });
    let podsCalled = 0;
    for (const c of cases) {
      const a = await runEpisode({ dataset: ds, case: c, policy: expert(), settings: settings(true) });
      const b = await runEpisode({ dataset: re, case: re.cases.find((x) => x.id === c.id)!, policy: expert(), settings: settings(true) });
      expect(b.messages).toEqual(a.messages);
      expect(b.answer).toEqual(a.answer?.map((r) => (r.pod ? { ...r, pod: re.podNames.get(r.pod) } : r)) ?? null);
      const text = a.messages.map((m) => m.content).join('\n');
      expect(ds.topology.pods.filter((p) => text.includes(p.pod)).map((p) => p.pod)).toEqual([]);
      podsCalled += a.tool_calls.filter((t) => t.name !== 'search_traces').length;
      // Without aliases the redeploy shows the model names it never read.
      const plain = await runEpisode({ dataset: ds, case: c, policy: expert(), settings: settings(false) });
      const plainRe = await runEpisode({
        dataset: re,
        case: re.cases.find((x) => x.id === c.id)!,
        policy: expert(),
        settings: settings(false),
      });
      expect(plainRe.messages).not.toEqual(plain.messages);
    }
    // The expert's metric and log checks name pods: the aliases went through calls, not only observations.
    expect(podsCalled).toBeGreaterThan(0);
  }, 120_000);
});
