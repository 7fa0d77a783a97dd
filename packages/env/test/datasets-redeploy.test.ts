import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { loadDataset, loadRedeployedDataset, redeployPodNames, type LoadedDataset, type RedeployedDataset } from '../src/datasets/index';
import { spreadCases } from '../src/eval/index';
import { ReplayPolicy, runEpisode } from '../src/episodes/index';
import { createExpert, ExpertSettingsSchema } from '../src/policies/index';
import { Toolbox, type PrintResultsData, type SearchTracesData } from '../src/tools/index';
import type { Case, Dataset } from '../src/types';

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

  it('renames the pods of log records too, and no new name is a name the original system has', async () => {
    const pod = ds.topology.pods.find((p) => ds.logs.query(p.pod, 0, Number.MAX_SAFE_INTEGER).length > 0)!.pod;
    const before = ds.logs.query(pod, 0, Number.MAX_SAFE_INTEGER);
    const after = re.logs.query(re.podNames.get(pod)!, 0, Number.MAX_SAFE_INTEGER);
    expect(after.length).toBe(before.length);
    expect(after.map((r) => r.pod)).toEqual(before.map(() => re.podNames.get(pod)));
    expect(after.map((r) => [r.ts_us, r.template_id, r.level])).toEqual(before.map((r) => [r.ts_us, r.template_id, r.level]));
    expect(re.logs.query(pod, 0, Number.MAX_SAFE_INTEGER)).toEqual([]);
    const real = new Set([...ds.topology.pods.map((p) => p.pod), ...ds.topology.services, ...ds.topology.nodes]);
    expect([...re.podNames.values()].filter((n) => real.has(n))).toEqual([]);
    // Loading again with the same seed gives the same dataset names.
    expect([...(await loadRedeployedDataset(dir, 7)).podNames]).toEqual([...re.podNames]);
  }, 120_000);

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

/** Every observation of a walk with pod aliases on: search_traces down the trace, then metrics and logs of each component seen, by the name shown. */
function walk(dataset: Dataset, c: Case): { texts: string[]; canonical: unknown[] } {
  const tb = new Toolbox(dataset, { span_aliases: true, pod_aliases: true, verdicts: true });
  const texts: string[] = [];
  const canonical: unknown[] = [];
  const queue = [c.entry_span_id];
  const seen: string[] = [];
  for (let n = 0; queue.length && n < 8; n++) {
    const o = tb.call('search_traces', { parent_span_id: tb.spanRef(queue.shift()!) });
    texts.push(o.text);
    for (const k of (o.data as SearchTracesData | undefined)?.children ?? []) {
      queue.push(k.span_id);
      for (const name of [k.service, k.pod, k.node]) if (name && !seen.includes(name)) seen.push(name);
    }
  }
  const ts = Math.round(c.timestamp_us / 1e6);
  for (const name of seen) {
    for (const tool of ['search_fluctuating_metrics', 'search_logs']) {
      const args = { service_name: tb.shown(name), timestamp: ts };
      texts.push(tb.call(tool, args).text);
      canonical.push(tb.canonical(tool, args));
    }
  }
  return { texts, canonical };
}

describe('every tool under pod aliases', () => {
  it('reads the same on a case and on its re-hashed copy, with no hash suffix of either day, and the calls name the real pods', () => {
    const suffixes = (pods: Iterable<string>) => [...pods].map((p) => p.slice(p.lastIndexOf('-', p.length - 7)));
    const hashes = [...suffixes(re.podNames.keys()), ...suffixes(re.podNames.values())];
    let logs = 0;
    for (const c of spreadCases(ds.cases, 10)) {
      const a = walk(ds, c);
      const b = walk(re, re.cases.find((x) => x.id === c.id)!);
      expect(b.texts).toEqual(a.texts);
      const all = a.texts.join('\n');
      expect(hashes.filter((h) => all.includes(h))).toEqual([]);
      logs += a.texts.filter((t) => /template|silent/i.test(t)).length;
      // The episode path (diversity's key) holds the pod the alias stood for, on each day its own.
      const named = (x: unknown) => (x as { service_name: string }).service_name;
      expect(a.canonical.map(named).filter((n) => re.podNames.has(n)).length).toBeGreaterThan(0);
      expect(b.canonical.map(named)).toEqual(a.canonical.map((x) => re.podNames.get(named(x)) ?? named(x)));
    }
    expect(logs).toBeGreaterThan(0);
  });

  it('lets an ORACL answer name a pod by the alias its sketch showed', async () => {
    const c = ds.cases.find((x) => x.truth.pod)!;
    const service = ds.topology.pods.find((p) => p.pod === c.truth.pod)!.service;
    const policy = new ReplayPolicy([`<think>-</think><Fault>-</Fault><Counterfactual>-</Counterfactual><root>${service}-1 | cpu</root>`]);
    const rec = await runEpisode({ dataset: ds, case: c, policy, protocol: 'oracl', settings: { tool_settings: { pod_aliases: true } } });
    expect(rec.answer).toEqual([{ service, pod: c.truth.pod, type: 'cpu' }]);
    const plain = await runEpisode({
      dataset: ds,
      case: c,
      policy: new ReplayPolicy([`<root>${service}-1 | cpu</root>`]),
      protocol: 'oracl',
    });
    // Off, the same text names no pod: kept as a service name, which is no real service.
    expect(plain.answer).toEqual([{ service: `${service}-1`, type: 'cpu' }]);
  });
});
