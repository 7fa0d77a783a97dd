/**
 * OpenTelemetry OTLP/JSON trace exports (`{resourceSpans:[{resource, scopeSpans:[{spans}]}]}`),
 * one document per `.json` file or one per line of a `.jsonl` file (the collector's file
 * exporter), plus a labels file: a JSON list of faults `{time, level, component, type}`.
 * Service, pod and node come from the resource attributes service.name, k8s.pod.name and
 * k8s.node.name; status from status.code.
 */
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { z } from 'zod';
import type { Span } from '../../types';
import type { FaultDraft } from '../cases';
import { DataError } from '../errors';
import type { Importer } from '../telemetry';
import { epochToUs, isoToUs, isoUs, nsStringToUs } from '../time';
import { walkFiles } from './walk';

export const OtlpSettings = z
  .object({
    /** Labels file, relative to the source dir. Default labels.json. */
    labelsFile: z.string().default('labels.json'),
    /** Fault window after a label's time when the label gives no durationSec, in seconds. Default 300. */
    faultWindowSec: z.number().positive().default(300),
  })
  .strict();

type Attr = { key?: string; value?: Record<string, unknown> };
type OtlpSpan = Record<string, unknown> & { status?: { code?: unknown } };

function attrs(list: unknown): Map<string, string> {
  const out = new Map<string, string>();
  if (!Array.isArray(list)) return out;
  for (const a of list as Attr[]) {
    const v = a.value && Object.values(a.value)[0];
    if (a.key && v !== undefined) out.set(a.key, String(v));
  }
  return out;
}

const STATUS: Record<string, Span['status']> = { '0': 'unset', '1': 'ok', '2': 'error', STATUS_CODE_UNSET: 'unset', STATUS_CODE_OK: 'ok', STATUS_CODE_ERROR: 'error' };

function spansOf(doc: unknown, where: (path: string) => DataError, out: Span[]) {
  const rs = (doc as { resourceSpans?: unknown }).resourceSpans;
  if (!Array.isArray(rs)) throw where('no resourceSpans list');
  rs.forEach((r: Record<string, unknown>, i) => {
    const a = attrs((r.resource as { attributes?: unknown } | undefined)?.attributes);
    const service = a.get('service.name');
    if (!service) throw where(`resourceSpans[${i}]: resource has no service.name`);
    const pod = a.get('k8s.pod.name') ?? service;
    const node = a.get('k8s.node.name');
    const scopes = (r.scopeSpans ?? r.instrumentationLibrarySpans ?? []) as { spans?: OtlpSpan[] }[];
    scopes.forEach((sc, j) =>
      (sc.spans ?? []).forEach((sp, k) => {
        const path = `resourceSpans[${i}].scopeSpans[${j}].spans[${k}]`;
        for (const f of ['traceId', 'spanId', 'startTimeUnixNano', 'endTimeUnixNano'] as const) {
          if (sp[f] === undefined || sp[f] === '') throw where(`${path}: missing ${f}`);
        }
        const startUs = nsStringToUs(String(sp.startTimeUnixNano));
        const endUs = nsStringToUs(String(sp.endTimeUnixNano));
        if (startUs === undefined || endUs === undefined || endUs < startUs) throw where(`${path}: bad start/end time`);
        const code = String(sp.status?.code ?? '0');
        const status = STATUS[code];
        if (!status) throw where(`${path}: unknown status.code '${code}'`);
        const parent = sp.parentSpanId ? String(sp.parentSpanId) : '';
        out.push({
          traceId: String(sp.traceId),
          spanId: String(sp.spanId),
          parentId: parent === '' ? null : parent,
          service,
          pod,
          ...(node ? { node } : {}),
          operation: String(sp.name ?? ''),
          startUs,
          durationUs: endUs - startUs,
          status,
          statusCode: code,
        });
      }),
    );
  });
}

function readLabels(file: string, windowSec: number, nodeOfPod: Map<string, string>, serviceOfPod: Map<string, string>): FaultDraft[] {
  let doc: unknown;
  try {
    doc = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new Error(`${file}: cannot read labels: ${(e as Error).message}`);
  }
  if (!Array.isArray(doc)) throw new Error(`${file}: labels must be a JSON list`);
  return doc.map((l: Record<string, unknown>, i) => {
    const bad = (m: string) => new Error(`${file}: [${i}]: ${m}`);
    const level = l.level;
    if (level !== 'service' && level !== 'pod' && level !== 'node') throw bad(`level must be service, pod or node, not '${String(level)}'`);
    const component = typeof l.component === 'string' && l.component ? l.component : undefined;
    if (!component) throw bad('missing component');
    const startUs = typeof l.time === 'number' ? epochToUs(String(l.time)) : isoToUs(String(l.time ?? ''));
    if (startUs === undefined) throw bad(`time '${String(l.time)}' is neither ISO-8601 nor a Unix time`);
    const dur = typeof l.durationSec === 'number' ? l.durationSec : windowSec;
    const node = level === 'node' ? component : level === 'pod' ? nodeOfPod.get(component) : undefined;
    const service = level === 'service' ? component : level === 'pod' ? serviceOfPod.get(component) : undefined;
    return {
      id: `otlp-${isoUs(startUs).replace(/[-:]/g, '').slice(0, 15)}-${component}`,
      truth: { level, ...(level === 'pod' ? { pod: component } : {}), ...(service ? { service } : {}), ...(node ? { node } : {}) },
      type: typeof l.type === 'string' ? l.type : 'unknown',
      startUs,
      endUs: startUs + dur * 1e6,
      notes: [],
    };
  });
}

export const otlp: Importer<typeof OtlpSettings> = {
  name: 'otlp',
  describe: 'OpenTelemetry OTLP/JSON trace exports (.json / .jsonl) with a labels file',
  settings: OtlpSettings,
  async import(src, s, progress) {
    const spans: Span[] = [];
    const labels = basename(s.labelsFile);
    for (const file of walkFiles(src, (n) => (n.endsWith('.json') || n.endsWith('.jsonl')) && n !== labels)) {
      progress(`reading ${file}`);
      const text = readFileSync(file, 'utf8');
      const docs = file.endsWith('.jsonl') ? text.split('\n') : [text];
      docs.forEach((line, i) => {
        if (!line.trim()) return;
        const lineNo = file.endsWith('.jsonl') ? i + 1 : 1;
        let doc: unknown;
        try {
          doc = JSON.parse(line);
        } catch (e) {
          throw new DataError(file, lineNo, `not JSON: ${(e as Error).message}`);
        }
        spansOf(doc, (m) => new DataError(file, lineNo, m), spans);
      });
    }
    const nodeOfPod = new Map<string, string>();
    const serviceOfPod = new Map<string, string>();
    for (const sp of spans) {
      serviceOfPod.set(sp.pod, sp.service);
      if (sp.node) nodeOfPod.set(sp.pod, sp.node);
    }
    const faults = readLabels(join(src, s.labelsFile), s.faultWindowSec, nodeOfPod, serviceOfPod);
    const pods = [...serviceOfPod].map(([pod, service]) => ({ pod, service, ...(nodeOfPod.has(pod) ? { node: nodeOfPod.get(pod) } : {}) }));
    return { spans, baselineSpans: [], metrics: [], logs: { templates: [], records: [] }, pods, faults };
  },
};
