import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureNezhaDataset, NEZHA_RAW } from '../../../testkit/nezha';
import { loadDataset, signature } from '../src/datasets/index';
import { spreadCases } from '../src/eval/index';
import {
  getTool,
  Toolbox,
  toolSpec,
  type PrintResultsData,
  type SearchLogsData,
  type SearchMetricsData,
  type SearchTracesData,
} from '../src/tools/index';
import type { Case, Dataset, Span } from '../src/types';

let ds: Dataset;
const unbounded = { max_items: 1_000_000, max_observation_chars: 10_000_000 };
const traces = (o: { data?: unknown }) => o.data as SearchTracesData;

beforeAll(async () => {
  ds = await loadDataset(await ensureNezhaDataset());
});

/** Rows of one raw Nezha trace file, read from the shared archive. */
function rawTraceFile(name: string): { spanId: string; parentId: string; pod: string; operation: string; durationUs: number }[] {
  const csv = execFileSync('tar', ['-xzOf', join(NEZHA_RAW, 'trainticket-2023-01-29.tgz'), `rca_data/2023-01-29/trace/${name}`], {
    maxBuffer: 1 << 28,
  }).toString('utf8');
  const lines = csv.split('\n').filter((l) => l.trim());
  expect(lines[0]).toBe('TraceID,SpanID,ParentID,PodName,OperationName,StartTimeUnixNano,EndTimeUnixNano,Duration');
  return lines.slice(1).map((l, i) => {
    const f = l.split(',');
    if (f.length !== 8) throw new Error(`${name}:${i + 2}: expected 8 fields, got ${f.length}`);
    return { spanId: f[1], parentId: f[2], pod: f[3], operation: f[4], durationUs: Number(f[7]) };
  });
}

describe('search_traces', () => {
  it('agrees with a brute-force scan on every span of a real trace file', () => {
    const rows = rawTraceFile('08_45_trace.csv');
    expect(rows.length).toBeGreaterThan(1000);
    const byParent = new Map<string, string[]>();
    for (const tid of ds.traces.traceIds()) {
      for (const s of ds.traces.trace(tid)) {
        if (s.parent_id === null) continue;
        const list = byParent.get(s.parent_id) ?? [];
        list.push(s.span_id);
        byParent.set(s.parent_id, list);
      }
    }
    const inFile = new Map<string, string[]>();
    for (const r of rows) inFile.set(r.parentId, [...(inFile.get(r.parentId) ?? []), r.spanId]);
    const tb = new Toolbox(ds, unbounded);
    let withChildren = 0;
    for (const r of rows) {
      const o = tb.call('search_traces', { parent_span_id: r.spanId });
      expect(o.ok).toBe(true);
      const d = traces(o);
      expect(d.parent).toMatchObject({ span_id: r.spanId, pod: r.pod, operation: r.operation, duration_us: r.durationUs });
      const got = d.children.map((c) => c.span_id);
      expect([...got].sort()).toEqual([...(byParent.get(r.spanId) ?? [])].sort());
      for (const id of inFile.get(r.spanId) ?? []) expect(got).toContain(id);
      for (let i = 1; i < d.children.length; i++) expect(d.children[i].start_us).toBeGreaterThanOrEqual(d.children[i - 1].start_us);
      expect(o.text.split('\n').filter((l) => l.startsWith('- '))).toHaveLength(got.length);
      if (got.length) withChildren++;
    }
    expect(withChildren).toBeGreaterThan(100);
  });

  it('distils each child against its usual duration and child count', () => {
    const c = ds.cases[0];
    const tb = new Toolbox(ds);
    const d = traces(tb.call('search_traces', { parent_span_id: c.entry_span_id }));
    expect(d.children.length).toBeGreaterThan(0);
    for (const child of d.children) {
      const span = ds.traces.span(child.span_id) as Span;
      const usual = ds.baseline.duration(span);
      expect(child.usual_mean_us).toBe(usual?.meanUs);
      if (usual) expect(child.ratio).toBeCloseTo(span.duration_us / usual.meanUs, 9);
      expect(child.slow).toBe((child.ratio ?? 0) >= 2);
      expect(child.child_count).toBe(ds.traces.children(child.span_id).length);
      expect(child.service).toBe(span.service);
    }
  });

  it('reports calls added or missing against the usual child pattern', () => {
    let found: { span: Span; added: string } | undefined;
    for (const c of ds.cases) {
      for (const span of ds.traces.trace(c.trace_id)) {
        const usual = ds.baseline.childPattern(span);
        const added =
          usual &&
          ds.traces
            .children(span.span_id)
            .map(signature)
            .find((s) => !usual.has(s));
        if (added) found = { span, added };
        if (found) break;
      }
      if (found) break;
    }
    expect(found).toBeDefined();
    const o = new Toolbox(ds).call('search_traces', { parent_span_id: found!.span.span_id });
    expect(traces(o).parent.calls.added).toContain(found!.added);
    expect(o.text).toContain(`added calls=[`);
  });

  it('answers an unknown span with a readable error observation', () => {
    const tb = new Toolbox(ds);
    const o = tb.call('search_traces', { parent_span_id: 'deadbeefdeadbeef' });
    expect(o).toMatchObject({ ok: false, truncated: false });
    expect(o.text).toMatch(/unknown span id "deadbeefdeadbeef"/);
    expect(tb.call('search_traces', { parent_span_id: 42 }).text).toMatch(/invalid arguments for search_traces: parent_span_id/);
    expect(tb.call('search_traces', {}).ok).toBe(false);
  });

  it('shows short span aliases and accepts them when aliases are on', () => {
    const c = ds.cases[0];
    const tb = new Toolbox(ds, { span_aliases: true });
    expect(tb.spanRef(c.entry_span_id)).toBe('s1');
    const o = tb.call('search_traces', { parent_span_id: 's1' });
    const d = traces(o);
    expect(d.parent.span_id).toBe(c.entry_span_id);
    expect(d.children.map((x) => x.ref)).toEqual(d.children.map((_, i) => `s${i + 2}`));
    expect(o.text).not.toContain(d.children[0].span_id);
    const viaAlias = traces(tb.call('search_traces', { parent_span_id: d.children[0].ref }));
    expect(viaAlias.parent.span_id).toBe(d.children[0].span_id);
  });

  it("states each span's verdict after its alias and lists openable, then most abnormal children first when verdicts are on", () => {
    const order = ['error', 'missing', 'slow', 'short', 'usual'];
    const seen = new Set<string>();
    for (const c of spreadCases(ds.cases, 40)) {
      const plain = new Toolbox(ds, { span_aliases: true });
      const told = new Toolbox(ds, { span_aliases: true, verdicts: true });
      const queue = [c.entry_span_id];
      for (let n = 0; queue.length && n < 6; n++) {
        const id = queue.shift()!;
        const before = plain.call('search_traces', { parent_span_id: id });
        const o = told.call('search_traces', { parent_span_id: id });
        const d = traces(o);
        // Same children as without verdicts, only the order and the words differ.
        expect(d.children.map((x) => x.span_id).sort()).toEqual(
          traces(before)
            .children.map((x) => x.span_id)
            .sort(),
        );
        const lines = o.text.split('\n').filter((l) => l.startsWith('- '));
        expect(lines).toHaveLength(d.children.length);
        const verdicts = lines.map((l, i) => {
          const m = /^- (s\d+) (\S+) (\S+) pod=(\S+) /.exec(l);
          expect(m, l).not.toBeNull();
          const k = d.children[i];
          expect([m![1], m![3], m![4]]).toEqual([k.ref, k.service, k.pod]);
          // The verdict from the raw span and the baseline, not from the tool's own summary.
          const span = ds.traces.span(k.span_id)!;
          const usual = ds.baseline.duration(span);
          const ratio = usual && usual.meanUs > 0 ? span.duration_us / usual.meanUs : undefined;
          const ownHandler = k.calls.added.some((a) => a === `${span.service} BasicErrorController.error`);
          const want =
            span.status === 'error' || ownHandler
              ? 'error'
              : k.calls.missing.length
                ? 'missing'
                : ratio !== undefined && ratio >= 2
                  ? 'slow'
                  : ratio !== undefined && ratio <= 0.5 && usual!.meanUs - span.duration_us > 1000
                    ? 'short'
                    : 'usual';
          expect(m![2], l).toBe(want);
          seen.add(want);
          // Spans that can be opened first, then by verdict.
          return (k.child_count > 0 ? 0 : order.length) + order.indexOf(want);
        });
        for (let i = 1; i < verdicts.length; i++) expect(verdicts[i]).toBeGreaterThanOrEqual(verdicts[i - 1]);
        expect(before.text).not.toMatch(/^- s\d+ (error|missing|slow|short|usual) /m);
        queue.push(...d.children.filter((k) => k.child_count > 0).map((k) => k.span_id));
      }
    }
    for (const v of ['error', 'missing', 'slow', 'short', 'usual']) expect(seen, v).toContain(v);
  });

  it('bounds the observation and says what was cut', () => {
    const parent = ds.cases.map((c) => ds.traces.span(c.entry_span_id) as Span).find((s) => ds.traces.children(s.span_id).length >= 2)!;
    const n = ds.traces.children(parent.span_id).length;
    const o = new Toolbox(ds, { max_items: 1 }).call('search_traces', { parent_span_id: parent.span_id });
    expect(traces(o).children).toHaveLength(1);
    expect(traces(o).omitted).toBe(n - 1);
    expect(o.truncated).toBe(true);
    expect(o.text).toContain(`[${n - 1} more child spans not shown (limit 1)]`);
    const small = new Toolbox(ds, { max_observation_chars: 200 }).call('search_traces', { parent_span_id: parent.span_id });
    expect(small.text.length).toBeLessThanOrEqual(200);
    expect(small.truncated).toBe(true);
    expect(small.text).toMatch(/\[cut: /);
  });
});

/** Naive oracle of Eq. 6-7: mean/std over the baseline window outside [t-d, t+d]. */
function oracleBreaks(series: { component: string; name: string; ts: Float64Array; values: Float64Array }[], tS: number): string[] {
  const out: string[] = [];
  for (const s of series) {
    const base: number[] = [];
    const win: number[] = [];
    s.ts.forEach((x, i) => {
      if (Math.abs(x - tS) <= 600) win.push(s.values[i]);
      else if (Math.abs(x - tS) <= 1200) base.push(s.values[i]);
    });
    if (win.length === 0 || base.length < 3) continue;
    const mu = base.reduce((a, b) => a + b, 0) / base.length;
    const sd = Math.sqrt(base.reduce((a, b) => a + (b - mu) ** 2, 0) / base.length);
    const sigma = Math.max(sd, 0.01 * Math.abs(mu), 1e-12);
    if (win.some((v) => Math.abs(v - mu) > 3 * sigma)) out.push(`${s.component}|${s.name}`);
  }
  return [...new Set(out)].sort();
}

describe('search_fluctuating_metrics', () => {
  const cpuCase = () => ds.cases.find((c) => ds.faults.find((f) => f.id === c.fault_id)?.type === 'cpu_contention') as Case;

  it('returns exactly the series that break the n-sigma band, the CPU of a cpu_contention pod among them', () => {
    const c = cpuCase();
    const pod = c.truth.pod as string;
    const o = new Toolbox(ds, unbounded).call('search_fluctuating_metrics', { service_name: pod, timestamp: c.timestamp_us });
    const d = o.data as SearchMetricsData;
    const node = ds.topology.pods.find((p) => p.pod === pod)?.node;
    const series = [...ds.metrics.series(pod), ...(node ? ds.metrics.series(node) : [])];
    const got = d.fluctuating.map((f) => `${f.component}|${f.metric}`).sort();
    expect(got).toEqual(oracleBreaks(series, c.timestamp_us / 1e6));
    expect(got).toContain(`${pod}|CpuUsage(m)`);
    for (const f of d.fluctuating) expect(Math.abs(f.max_deviation_sigma)).toBeGreaterThan(3);
    expect(o.components).toContain(pod);
  });

  it('covers a service with its pods and node, each series once', () => {
    const c = cpuCase();
    const service = c.truth.service as string;
    const d = new Toolbox(ds, unbounded).call('search_fluctuating_metrics', { service_name: service, timestamp: c.timestamp_us })
      .data as SearchMetricsData;
    const keys = d.fluctuating.map((f) => `${f.component}|${f.metric}`);
    expect(new Set(keys).size).toBe(keys.length);
    expect(d.fluctuating.some((f) => f.level === 'pod')).toBe(true);
  });

  it('reads the same instant in any accepted timestamp form', () => {
    const c = cpuCase();
    const tb = new Toolbox(ds);
    const sec = Math.floor(c.timestamp_us / 1e6);
    const forms = [sec, sec * 1000, String(sec), new Date(sec * 1000).toISOString()];
    const texts = forms.map((t) => tb.call('search_fluctuating_metrics', { service_name: c.truth.pod, timestamp: t }).text);
    for (const t of texts) expect(t).toBe(texts[0]);
  });

  it('flags nothing with a huge n, and errors readably on bad names and times', () => {
    const c = cpuCase();
    const o = new Toolbox(ds, { n_sigma: 1e9 }).call('search_fluctuating_metrics', {
      service_name: c.truth.pod,
      timestamp: c.timestamp_us,
    });
    expect((o.data as SearchMetricsData).fluctuating).toEqual([]);
    expect(o.text).toMatch(/None of \d+ metric series broke the band/);
    const tb = new Toolbox(ds);
    const unknown = tb.call('search_fluctuating_metrics', { service_name: 'ts-nonexistent-service', timestamp: c.timestamp_us });
    expect(unknown.ok).toBe(false);
    expect(unknown.text).toMatch(/unknown service, pod or node "ts-nonexistent-service"; known services: .*ts-/);
    const badTime = tb.call('search_fluctuating_metrics', { service_name: c.truth.pod, timestamp: 'last tuesday' });
    expect(badTime.ok).toBe(false);
    expect(badTime.text).toMatch(/cannot read timestamp/);
  });
});

describe('search_logs', () => {
  it('groups error and warning lines into templates whose counts add up, with their usual rate', () => {
    const c = ds.cases.find(
      (x) => ds.logs.query(x.truth.service as string, x.timestamp_us - 3e8, x.timestamp_us + 3e8, ['error', 'warn']).length > 0,
    )!;
    const service = c.truth.service as string;
    const o = new Toolbox(ds, unbounded).call('search_logs', { service_name: service, timestamp: c.timestamp_us });
    const d = o.data as SearchLogsData;
    const lines = ds.logs.query(service, c.timestamp_us - 3e8, c.timestamp_us + 3e8, ['error', 'warn']);
    expect(d.templates.reduce((a, t) => a + t.count, 0)).toBe(lines.length);
    for (const t of d.templates) {
      expect(t.baseline_rate_per_min).toBe(ds.logs.baselineRate(service, t.template_id));
      expect(t.rate_per_min).toBeCloseTo(t.count / 10, 9);
      expect(t.template).toBe(ds.logs.template(t.template_id)?.template);
    }
    expect(o.text.split('\n').filter((l) => l.startsWith('- '))).toHaveLength(d.templates.length);
  });

  it('reads the logs of every pod on a node when given a node', () => {
    const c = ds.cases[0];
    const node = c.truth.node as string;
    const onNode = new Set(ds.topology.pods.filter((p) => p.node === node).map((p) => p.pod));
    const d = new Toolbox(ds, unbounded).call('search_logs', { service_name: node, timestamp: c.timestamp_us }).data as SearchLogsData;
    expect(d.level).toBe('node');
    const expected = [...onNode].flatMap((p) => ds.logs.query(p, c.timestamp_us - 3e8, c.timestamp_us + 3e8, ['error', 'warn'])).length;
    expect(d.templates.reduce((a, t) => a + t.count, 0)).toBe(expected);
    for (const t of d.templates) for (const p of t.pods) expect(onNode.has(p)).toBe(true);
  });
});

describe('search_logs silent statements', () => {
  /** Raw lines of one pod whose text holds `marker`, from the shared log archive, with their Unix µs. */
  function rawLines(files: string[], pod: string, marker: string): number[] {
    // No files named: the whole archive.
    const csv = execFileSync(
      'tar',
      ['-xzOf', join(NEZHA_RAW, 'trainticket-2023-01-29-logs.tgz'), ...files.map((f) => `rca_data/2023-01-29/log/${f}`)],
      {
        maxBuffer: 1 << 30,
      },
    ).toString('utf8');
    return csv
      .split('\n')
      .filter((l) => l.includes(pod) && l.includes(marker))
      .map((l) => Number(BigInt(l.split(',')[1]) / 1000n));
  }

  const pod = 'ts-route-service-b6c59fb57-zv8dt';
  const marker = 'RouteController#53'; // logs every queryByIds call: [getRouteById][Query route by id][RouteId: [...]]

  it("lists the route service's usual queryByIds line as silent during its exception fault, counted as in the raw logs", () => {
    // The fault of 10:56:45 throws in ts-route-service; the raw line stops from then on.
    const tUs = Date.UTC(2023, 0, 29, 10, 57, 40) * 1000;
    const d = new Toolbox(ds, unbounded).call('search_logs', { service_name: 'ts-route-service', timestamp: tUs }).data as SearchLogsData;
    const hit = d.silent.find((x) => x.statement.includes('[getRouteById][Query route by id][RouteId: [<UUID>...]]'))!;
    expect(hit).toMatchObject({ service: 'ts-route-service', pods: [pod], level: 'info' });
    const during = rawLines(['10_56_log.csv', '10_57_log.csv', '10_58_log.csv'], pod, marker).filter((t) => Math.abs(t - tUs) <= 60e6);
    expect(hit.seen).toBe(during.length);
    expect(hit.seen).toBeLessThanOrEqual(0.2 * hit.expected);
    // The usual count by hand: the raw lines in the windows of other services' faults, per minute, over the ±60 s window.
    const all = rawLines([], pod, marker);
    const healthy = ds.faults.filter((f) => f.truth.service !== 'ts-route-service');
    const n = all.filter((t) => healthy.some((f) => t >= f.start_us && t <= f.end_us)).length;
    const minutes = healthy.reduce((m, f) => m + (f.end_us - f.start_us) / 60e6, 0);
    // Within one raw line over the whole day: the hand count does not repeat the importer's row checks.
    expect(Math.abs((hit.expected / 2) * minutes - n)).toBeLessThanOrEqual(1);
  });

  it('lists nothing as silent where the usual lines keep coming', () => {
    const tUs = Date.UTC(2023, 0, 29, 10, 51, 0) * 1000;
    const d = new Toolbox(ds, unbounded).call('search_logs', { service_name: pod, timestamp: tUs }).data as SearchLogsData;
    expect(
      rawLines(['10_50_log.csv', '10_51_log.csv', '10_52_log.csv'], pod, marker).filter((t) => Math.abs(t - tUs) <= 60e6).length,
    ).toBeGreaterThan(20);
    expect(d.silent).toEqual([]);
  });
});

describe('print_results', () => {
  it('records a ranked answer and the components it names', () => {
    const tb = new Toolbox(ds);
    const pod = ds.topology.pods[0];
    const o = tb.call('print_results', { root_causes: [{ pod: pod.pod, reason: 'cpu' }, { service: 'ts-made-up-service' }] });
    expect((o.data as PrintResultsData).answer).toEqual([{ pod: pod.pod, reason: 'cpu' }, { service: 'ts-made-up-service' }]);
    expect(o.components).toContain(pod.pod);
    expect(o.components).not.toContain('ts-made-up-service');
    expect(tb.isTerminal('print_results')).toBe(true);
  });
  it('takes a span shown earlier for its service and pod, and refuses one never shown', () => {
    const c = ds.cases[0];
    const tb = new Toolbox(ds, { span_aliases: true });
    const child = traces(tb.call('search_traces', { parent_span_id: tb.spanRef(c.entry_span_id) })).children[0];
    const span = ds.traces.span(child.span_id)!;
    const o = tb.call('print_results', { root_causes: [{ span: child.ref }, { service: 'ts-order-service' }] });
    expect(o.ok).toBe(true);
    expect((o.data as PrintResultsData).answer).toEqual([{ service: span.service, pod: span.pod }, { service: 'ts-order-service' }]);
    expect(o.components).toContain(span.pod);
    // Accepted, not offered: runs that do not answer by span keep the schema they had.
    expect(JSON.stringify(toolSpec(getTool('print_results')!).parameters)).not.toContain('span');
    const bad = tb.call('print_results', { root_causes: [{ span: 's999' }] });
    expect(bad).toMatchObject({ ok: false });
    expect(bad.text).toMatch(/unknown span id "s999"/);
  });
  it('refuses an empty list, an entry without a component and a wrong type', () => {
    const tb = new Toolbox(ds);
    expect(tb.validate('print_results', { root_causes: [] })).toMatchObject({ ok: false });
    expect(tb.validate('print_results', { root_causes: [{ reason: 'x' }] })).toMatchObject({
      ok: false,
      error: expect.stringMatching(/at least one of node, service, pod/),
    });
    expect(tb.validate('print_results', { root_causes: 'ts-order-service' })).toMatchObject({ ok: false });
  });
});

describe('tool specs', () => {
  it('render each tool as an OpenAI function spec with required arguments', () => {
    const specs = new Toolbox(ds).specs(['search_traces', 'search_fluctuating_metrics', 'search_logs', 'print_results']);
    expect(specs.map((s) => (s.parameters as { required: string[] }).required)).toEqual([
      ['parent_span_id'],
      ['service_name', 'timestamp'],
      ['service_name', 'timestamp'],
      ['root_causes'],
    ]);
    expect(() => new Toolbox(ds).specs(['no_such_tool'])).toThrow(/unknown tool "no_such_tool"/);
  });
});
