/** OTLP/JSON importer on exports the test writes: resource attributes, ns times, status codes, labels, errors. */
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { importDataset } from '../src/datasets/index';

const T0_NS = 1_700_000_000_000_000_000n;
const SEC = 1_000_000_000n;

const str = (key: string, v: string) => ({ key, value: { stringValue: v } });

function resource(service: string, pod: string, node: string, spans: object[]) {
  return {
    resource: { attributes: [str('service.name', service), str('k8s.pod.name', pod), str('k8s.node.name', node)] },
    scopeSpans: [{ scope: { name: 'test' }, spans }],
  };
}

function span(traceId: string, spanId: string, parent: string, name: string, startNs: bigint, durNs: bigint, code: number | string = 0) {
  return {
    traceId,
    spanId,
    parentSpanId: parent,
    name,
    startTimeUnixNano: String(startNs),
    endTimeUnixNano: String(startNs + durNs),
    status: { code },
  };
}

/** One request: gateway entry calling orders; returned as one export document. */
function request(i: number, atNs: bigint, ordersNs: bigint, code: number | string = 0) {
  const t = `t${i}`;
  return {
    resourceSpans: [
      resource('gateway', 'gateway-7d9f-abcde', 'worker-1', [span(t, `${t}a`, '', 'GET /orders', atNs, ordersNs + 2_000_000n)]),
      resource('orders', 'orders-5c8b-xyz12', 'worker-2', [span(t, `${t}b`, `${t}a`, 'OrdersService/List', atNs + 1_000n, ordersNs, code)]),
    ],
  };
}

function writeSource(dir: string, breakSpan = false) {
  const docs = [];
  for (let i = 0; i < 4; i++) docs.push(request(i, T0_NS + BigInt(i) * 30n * SEC, 3_000_000n));
  const f = T0_NS + 600n * SEC;
  docs.push(request(10, f + 5n * SEC, 90_000_000n));
  docs.push(request(11, f + 9n * SEC, 3_000_000n, 'STATUS_CODE_ERROR'));
  docs.push(request(12, f + 12n * SEC, 3_100_000n, 1));
  if (breakSpan) delete (docs[2].resourceSpans[1].scopeSpans[0].spans[0] as { spanId?: string }).spanId;
  writeFileSync(join(dir, 'traces.jsonl'), docs.map((d) => JSON.stringify(d)).join('\n'));
  const at = new Date(Number(f / 1_000_000n)).toISOString();
  writeFileSync(
    join(dir, 'labels.json'),
    JSON.stringify([
      { time: at, level: 'pod', component: 'orders-5c8b-xyz12', type: 'latency' },
      { time: Number(f / SEC) + 3600, level: 'service', component: 'gateway', type: 'exception', duration_sec: 60 },
    ]),
  );
}

describe('otlp importer', () => {
  it('reads spans, resource attributes and labels, and derives cases', async () => {
    const src = mkdtempSync(join(tmpdir(), 'otlp-src-'));
    writeSource(src);
    const ds = await importDataset({ format: 'otlp', src, out: mkdtempSync(join(tmpdir(), 'otlp-out-')) });
    const child = ds.traces.span('t10b')!;
    expect(child).toMatchObject({ service: 'orders', pod: 'orders-5c8b-xyz12', node: 'worker-2', parent_id: 't10a', duration_us: 90_000 });
    expect(child.start_us).toBe(Number((T0_NS + 605n * SEC) / 1000n) + 1);
    expect(ds.traces.span('t10a')!.parent_id).toBeNull();
    expect(ds.traces.span('t11b')!.status).toBe('error');
    expect(ds.traces.span('t12b')!.status).toBe('ok');
    expect(ds.traces.span('t0b')!.status).toBe('unset');
    expect(ds.topology.pods.map((p) => [p.pod, p.service, p.node])).toEqual([
      ['gateway-7d9f-abcde', 'gateway', 'worker-1'],
      ['orders-5c8b-xyz12', 'orders', 'worker-2'],
    ]);
    const [pod, svc] = ds.faults;
    expect(pod.truth).toEqual({ level: 'pod', pod: 'orders-5c8b-xyz12', service: 'orders', node: 'worker-2' });
    expect(pod.end_us - pod.start_us).toBe(300 * 1e6);
    expect(ds.cases.map((c) => c.trace_id)).toEqual(['t10', 't11']);
    expect(svc.end_us - svc.start_us).toBe(60 * 1e6);
    expect(svc.no_case_reason).toBe('no request starts inside the fault window');
  });

  it('names file and line of a bad span and of a bad label', async () => {
    const src = mkdtempSync(join(tmpdir(), 'otlp-bad-'));
    writeSource(src, true);
    await expect(importDataset({ format: 'otlp', src, out: join(src, 'out') })).rejects.toThrow(
      `${join(src, 'traces.jsonl')}:3: resourceSpans[1].scopeSpans[0].spans[0]: missing spanId`,
    );
    const src2 = mkdtempSync(join(tmpdir(), 'otlp-bad-'));
    writeSource(src2);
    writeFileSync(join(src2, 'labels.json'), JSON.stringify([{ time: 'yesterday', level: 'pod', component: 'x' }], null, 2));
    await expect(importDataset({ format: 'otlp', src: src2, out: join(src2, 'out') })).rejects.toThrow(
      `${join(src2, 'labels.json')}:2: [0]: time 'yesterday' is neither ISO-8601 nor a Unix time`,
    );
  });

  it('refuses a label written before the snake_case rename (durationSec), naming file, line and the new spelling', async () => {
    const src = mkdtempSync(join(tmpdir(), 'otlp-old-'));
    writeSource(src);
    const old = [{ time: 1_700_000_600, level: 'service', component: 'gateway', type: 'exception', durationSec: 60 }];
    writeFileSync(join(src, 'labels.json'), JSON.stringify(old, null, 2));
    const out = join(src, 'out');
    await expect(importDataset({ format: 'otlp', src, out })).rejects.toThrow(
      `${join(src, 'labels.json')}:7: [0].durationSec: renamed: write duration_sec (keys are snake_case)`,
    );
    expect(existsSync(out)).toBe(false);
  });
});
