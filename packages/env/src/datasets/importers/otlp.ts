/**
 * OpenTelemetry OTLP/JSON trace exports (`{resourceSpans:[{resource, scopeSpans:[{spans}]}]}`),
 * one document per `.json` file or one per line of a `.jsonl` file (the collector's file
 * exporter), plus a labels file: a JSON list of faults `{time, level, component, type}`.
 * Service, pod and node come from the resource attributes service.name, k8s.pod.name and
 * k8s.node.name; status from status.code.
 */
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { z } from 'zod';
import type { Span } from '../../types';
import type { FaultDraft } from '../cases';
import { LayoutError } from '../errors';
import { jsonError, parseJson, type JsonPath } from '../json';
import type { Importer } from '../telemetry';
import { epochToUs, isoToUs, isoUs, nsStringToUs } from '../time';
import { snakeCase, unknownKeyHint } from '../../zod-keys';
import { sourceDir, walkFiles } from './walk';

export const OtlpSettings = z
  .object({
    /** Labels file, relative to the source dir. Default labels.json. */
    labels_file: z.string().default('labels.json').describe('Labels file, relative to the source dir. Default labels.json.'),
    /** Fault window after a label's time when the label gives no duration_sec, in seconds. Default 300. */
    fault_window_sec: z
      .number()
      .positive()
      .default(300)
      .describe("Fault window after a label's time when the label gives no duration_sec, in seconds. Default 300."),
  })
  .strict();

type Attr = { key?: unknown; value?: unknown };
type OtlpSpan = Record<string, unknown> & { status?: { code?: unknown } };

const LABEL_KEYS = ['time', 'level', 'component', 'type', 'duration_sec'];
const LABELS_KEEP = 'the otlp layout keeps the faults there: a JSON list of {time, level, component, type, duration_sec?}';
const TRACES_KEEP =
  'the otlp layout keeps OTLP/JSON trace exports there: .json files of one {resourceSpans: [...]} document, or .jsonl files of one per line';

function attrs(list: unknown): Map<string, string> {
  const out = new Map<string, string>();
  if (!Array.isArray(list)) return out;
  for (const a of list as Attr[]) {
    const v = a && typeof a.value === 'object' && a.value !== null ? Object.values(a.value)[0] : undefined;
    if (typeof a?.key === 'string' && v !== undefined) out.set(a.key, String(v));
  }
  return out;
}

const STATUS: Record<string, Span['status']> = {
  '0': 'unset',
  '1': 'ok',
  '2': 'error',
  STATUS_CODE_UNSET: 'unset',
  STATUS_CODE_OK: 'ok',
  STATUS_CODE_ERROR: 'error',
};

const list = (v: unknown): unknown[] | undefined => (Array.isArray(v) ? v : v === undefined ? [] : undefined);
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Spans of one export document; `bad(path, message)` makes the error at that value's line. */
function spansOf(doc: unknown, bad: (path: JsonPath, message: string) => Error, out: Span[]) {
  const rs = isObject(doc) ? doc.resourceSpans : undefined;
  if (!Array.isArray(rs)) throw bad([], 'no resourceSpans list');
  rs.forEach((r: unknown, i) => {
    if (!isObject(r)) throw bad(['resourceSpans', i], 'not an object');
    const a = attrs(isObject(r.resource) ? r.resource.attributes : undefined);
    const service = a.get('service.name');
    if (!service) throw bad(['resourceSpans', i], 'resource has no service.name');
    const pod = a.get('k8s.pod.name') ?? service;
    const node = a.get('k8s.node.name');
    const scopeKey = r.scopeSpans !== undefined ? 'scopeSpans' : 'instrumentationLibrarySpans';
    const scopes = list(r[scopeKey]);
    if (!scopes) throw bad(['resourceSpans', i, scopeKey], 'not a list');
    scopes.forEach((sc: unknown, j) => {
      const at = ['resourceSpans', i, scopeKey, j];
      const spans = isObject(sc) ? list(sc.spans) : undefined;
      if (!spans) throw bad(at, 'not an object with a spans list');
      spans.forEach((sp: unknown, k) => {
        const path = [...at, 'spans', k];
        if (!isObject(sp)) throw bad(path, 'not a span object');
        for (const f of ['traceId', 'spanId', 'startTimeUnixNano', 'endTimeUnixNano'] as const) {
          if (sp[f] === undefined || sp[f] === '' || isObject(sp[f])) throw bad(path, `missing ${f}`);
        }
        const startUs = nsStringToUs(String(sp.startTimeUnixNano));
        const endUs = nsStringToUs(String(sp.endTimeUnixNano));
        if (startUs === undefined || endUs === undefined || endUs < startUs) throw bad(path, 'bad start/end time');
        const st = (sp as OtlpSpan).status;
        const code = String((isObject(st) ? st.code : undefined) ?? '0');
        const status = STATUS[code];
        if (!status) throw bad(path, `unknown status.code '${code}'`);
        const parent = sp.parentSpanId ? String(sp.parentSpanId) : '';
        out.push({
          trace_id: String(sp.traceId),
          span_id: String(sp.spanId),
          parent_id: parent === '' ? null : parent,
          service,
          pod,
          ...(node ? { node } : {}),
          operation: String(sp.name ?? ''),
          start_us: startUs,
          duration_us: endUs - startUs,
          status,
          status_code: code,
        });
      });
    });
  });
}

function readLabels(file: string, windowSec: number, nodeOfPod: Map<string, string>, serviceOfPod: Map<string, string>): FaultDraft[] {
  const text = readFileSync(file, 'utf8');
  const doc = parseJson(file, text);
  if (!Array.isArray(doc)) throw jsonError(file, text, [], 'labels must be a JSON list');
  return doc.map((l: unknown, i) => {
    const bad = (m: string) => jsonError(file, text, [i], m);
    if (!isObject(l)) throw bad('not a label object');
    // Labels written before issue 28 spelt durationSec: its window would silently fall back to the default.
    const respelt = Object.keys(l).find((k) => snakeCase(k) !== k && LABEL_KEYS.includes(snakeCase(k)));
    if (respelt) throw jsonError(file, text, [i, respelt], unknownKeyHint(respelt, LABEL_KEYS));
    const level = l.level;
    if (level !== 'service' && level !== 'pod' && level !== 'node') throw bad(`level must be service, pod or node, not '${String(level)}'`);
    const component = typeof l.component === 'string' && l.component ? l.component : undefined;
    if (!component) throw bad('missing component');
    const startUs = typeof l.time === 'number' ? epochToUs(String(l.time)) : isoToUs(String(l.time ?? ''));
    if (startUs === undefined) throw bad(`time '${String(l.time)}' is neither ISO-8601 nor a Unix time`);
    const dur = typeof l.duration_sec === 'number' && l.duration_sec > 0 ? l.duration_sec : windowSec;
    const node = level === 'node' ? component : level === 'pod' ? nodeOfPod.get(component) : undefined;
    const service = level === 'service' ? component : level === 'pod' ? serviceOfPod.get(component) : undefined;
    return {
      id: `otlp-${isoUs(startUs).replace(/[-:]/g, '').slice(0, 15)}-${component}`,
      truth: { level, ...(level === 'pod' ? { pod: component } : {}), ...(service ? { service } : {}), ...(node ? { node } : {}) },
      type: typeof l.type === 'string' ? l.type : 'unknown',
      start_us: startUs,
      end_us: startUs + dur * 1e6,
      notes: [],
    };
  });
}

export const otlp: Importer<typeof OtlpSettings> = {
  name: 'otlp',
  describe: 'OpenTelemetry OTLP/JSON trace exports (.json / .jsonl) with a labels file',
  settings: OtlpSettings,
  async import(src, s, progress) {
    sourceDir(src, TRACES_KEEP);
    const labelsFile = join(src, s.labels_file);
    if (!existsSync(labelsFile)) throw new LayoutError(labelsFile, 'is missing', LABELS_KEEP);
    const labels = basename(s.labels_file);
    const files = walkFiles(src, (n) => (n.endsWith('.json') || n.endsWith('.jsonl')) && n !== labels);
    if (!files.length) throw new LayoutError(src, 'holds no .json or .jsonl file', TRACES_KEEP);
    const spans: Span[] = [];
    for (const file of files) {
      progress(`reading ${file}`);
      const text = readFileSync(file, 'utf8');
      const docs = file.endsWith('.jsonl') ? text.split('\n') : [text];
      docs.forEach((doc, i) => {
        if (!doc.trim()) return;
        const line = file.endsWith('.jsonl') ? i + 1 : 1;
        spansOf(parseJson(file, doc, line), (path, m) => jsonError(file, doc, path, m, line), spans);
      });
    }
    const nodeOfPod = new Map<string, string>();
    const serviceOfPod = new Map<string, string>();
    for (const sp of spans) {
      serviceOfPod.set(sp.pod, sp.service);
      if (sp.node) nodeOfPod.set(sp.pod, sp.node);
    }
    const faults = readLabels(labelsFile, s.fault_window_sec, nodeOfPod, serviceOfPod);
    const pods = [...serviceOfPod].map(([pod, service]) => ({ pod, service, ...(nodeOfPod.has(pod) ? { node: nodeOfPod.get(pod) } : {}) }));
    return { spans, baselineSpans: [], metrics: [], logs: { templates: [], records: [] }, pods, faults };
  },
};
