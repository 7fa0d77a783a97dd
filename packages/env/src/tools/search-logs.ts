/**
 * search_logs(service_name, timestamp): error and warning lines around t grouped into
 * templates with counts, each rate compared with the service's fault-free rate, and the
 * statements (any level) the service usually logs that went silent around t.
 */
import type { LogLevel, LogRecord } from '../types';
import { boundItems, errorObservation, okObservation } from './bound';
import { registerTool, resolveComponent, unknownComponentError, type ToolContext } from './registry';
import { isoOfUs, parseTimestamp } from './timestamp';
import { componentAtTimeArgs, componentAtTimeCanonical, componentAtTimeNames } from './component-args';

export interface LogTemplateCount {
  template_id: number;
  template: string;
  level: LogLevel;
  count: number;
  /** Lines per minute in the window. */
  rate_per_min: number;
  /** Usual lines per minute of this template for the service; undefined without baseline. */
  baseline_rate_per_min?: number;
  /** rate_per_min / baseline_rate_per_min; undefined when that rate is unknown or 0. */
  ratio?: number;
  /** The usual rate is known and 0: the template is new under the fault. */
  unseen_in_baseline: boolean;
  services: string[];
  pods: string[];
}

/** A log statement the service usually writes that (almost) stopped around the time. */
export interface SilentStatement {
  /** The statement's template, lists of masked values collapsed (one statement logs lists of any length). */
  statement: string;
  level: LogLevel;
  service: string;
  pods: string[];
  /** Lines the usual rate predicts in the silence window, and lines seen there. */
  expected: number;
  seen: number;
}

export interface SearchLogsData {
  component: string;
  level: 'service' | 'pod' | 'node';
  timestamp_us: number;
  window_s: number;
  templates: LogTemplateCount[];
  omitted: number;
  /** Usual statements gone silent within ±silent_window_s, least seen against expected first. */
  silent: SilentStatement[];
}

const args = componentAtTimeArgs;

/** Log sources of a target: the service or pod itself, or every pod on a node. */
function sources(ctx: ToolContext, target: { level: string; name: string }): string[] {
  if (target.level !== 'node') return [target.name];
  return ctx.dataset.topology.pods.filter((p) => p.node === target.name).map((p) => p.pod);
}

function group(ctx: ToolContext, records: LogRecord[], minutes: number): LogTemplateCount[] {
  const byKey = new Map<string, LogRecord[]>();
  for (const r of records) {
    const k = `${r.template_id}|${r.level}`;
    const list = byKey.get(k);
    if (list) list.push(r);
    else byKey.set(k, [r]);
  }
  return [...byKey.values()].map((rs) => {
    const first = rs[0];
    const services = [...new Set(rs.map((r) => r.service))].sort();
    const ratePerMin = rs.length / minutes;
    const base = services.map((s) => ctx.dataset.logs.baselineRate(s, first.template_id)).filter((v): v is number => v !== undefined);
    const baselineRatePerMin = base.length ? base.reduce((a, b) => a + b, 0) : undefined;
    const ratio = baselineRatePerMin ? ratePerMin / baselineRatePerMin : undefined;
    return {
      template_id: first.template_id,
      template: ctx.dataset.logs.template(first.template_id)?.template ?? `template ${first.template_id}`,
      level: first.level,
      count: rs.length,
      rate_per_min: ratePerMin,
      baseline_rate_per_min: baselineRatePerMin,
      ratio,
      unseen_in_baseline: baselineRatePerMin === 0,
      services,
      pods: [...new Set(rs.map((r) => r.pod))].sort(),
    };
  });
}

/** One statement's template, whatever the length of the lists of masked values it logged. */
export const statementOf = (template: string): string => template.replace(/<(\w+)>(?:\s*,\s*<\1>)+/g, '<$1>...');

/** Pods of the target by service, for judging each service's usual statements. */
function podsByService(ctx: ToolContext, target: { level: string; name: string }): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const p of ctx.dataset.topology.pods) {
    const hit =
      target.level === 'node' ? p.node === target.name : target.level === 'pod' ? p.pod === target.name : p.service === target.name;
    if (hit) out.set(p.service, [...(out.get(p.service) ?? []), p.pod]);
  }
  if (!out.size && target.level === 'service') out.set(target.name, [target.name]);
  return out;
}

function silentStatements(ctx: ToolContext, target: { level: string; name: string }, tUs: number): SilentStatement[] {
  const { settings, dataset } = ctx;
  const halfUs = settings.silent_window_s * 1e6;
  const minutes = (2 * settings.silent_window_s) / 60;
  const out: SilentStatement[] = [];
  for (const [service, pods] of podsByService(ctx, target)) {
    const usual = new Map<string, { level: LogLevel; rate: number }>();
    for (const u of dataset.logs.usualTemplates(service)) {
      const t = dataset.logs.template(u.templateId);
      if (!t) continue;
      const key = statementOf(t.template);
      const e = usual.get(key) ?? { level: 'info', rate: 0 };
      e.rate += u.ratePerMin;
      usual.set(key, e);
    }
    const seen = new Map<string, number>();
    for (const pod of pods) {
      for (const r of dataset.logs.query(pod, tUs - halfUs, tUs + halfUs)) {
        const key = statementOf(dataset.logs.template(r.template_id)?.template ?? '');
        seen.set(key, (seen.get(key) ?? 0) + 1);
        const e = usual.get(key);
        if (e) e.level = r.level;
      }
    }
    for (const [statement, { level, rate }] of usual) {
      const expected = rate * minutes;
      const n = seen.get(statement) ?? 0;
      if (expected >= settings.silent_min_expected && n <= settings.silent_max_ratio * expected)
        out.push({ statement, level, service, pods, expected, seen: n });
    }
  }
  return out.sort((a, b) => a.seen / a.expected - b.seen / b.expected || b.expected - a.expected);
}

function silentLine(s: SilentStatement, windowS: number): string {
  const text = s.statement.length > 160 ? `${s.statement.slice(0, 160)}...` : s.statement;
  return `- ${s.service} pods=${s.pods.join(',')}: usually ~${s.expected.toFixed(0)} line(s) within ±${windowS}s, seen ${s.seen}: ${text.replace(/\s+/g, ' ')}`;
}

/** Most unusual first: rate above the usual rate, unknown baselines counted in full. */
const excess = (t: LogTemplateCount) => t.rate_per_min - (t.baseline_rate_per_min ?? 0);

function line(t: LogTemplateCount): string {
  const usual =
    t.baseline_rate_per_min === undefined
      ? 'no usual rate'
      : t.unseen_in_baseline
        ? 'never seen in the fault-free baseline'
        : `usual ${t.baseline_rate_per_min.toFixed(2)}/min, x${(t.ratio ?? 0).toFixed(1)}`;
  const text = t.template.length > 200 ? `${t.template.slice(0, 200)}...` : t.template;
  return `- [${t.level}] x${t.count} (${t.rate_per_min.toFixed(2)}/min, ${usual}) pods=${t.pods.join(',')}: ${text.replace(/\s+/g, ' ')}`;
}

registerTool({
  name: 'search_logs',
  description:
    'Error and warning log lines of a service, pod or node around a time, grouped into templates with counts and their rate compared with the usual rate.',
  args,
  terminal: false,
  canonical: componentAtTimeCanonical,
  argComponents: componentAtTimeNames,
  run(ctx, a) {
    const { settings } = ctx;
    const target = resolveComponent(ctx, a.service_name);
    if (!target) return errorObservation(settings, unknownComponentError(ctx, a.service_name));
    const t = parseTimestamp(a.timestamp, settings.timestamp_formats);
    if (!t.ok) return errorObservation(settings, t.error, [target.name]);
    const halfUs = settings.log_delta_s * 1e6;
    const records = sources(ctx, target).flatMap((c) => ctx.dataset.logs.query(c, t.us - halfUs, t.us + halfUs, ['error', 'warn']));
    const all = group(ctx, records, (2 * settings.log_delta_s) / 60).sort((x, y) => excess(y) - excess(x));
    const { shown: kept, note } = boundItems(all, settings.max_items, 'log templates');
    const lines = [`Error/warning logs of ${target.level} ${target.name} within ±${settings.log_delta_s}s of ${isoOfUs(t.us)}:`];
    if (kept.length === 0) lines.push('No error or warning lines.');
    else lines.push(`${records.length} line(s) in ${all.length} template(s):`, ...kept.map(line));
    if (note) lines.push(note);
    const silentAll = silentStatements(ctx, target, t.us);
    const { shown: silent, note: silentNote } = boundItems(silentAll, settings.max_items, 'silent statements');
    if (silent.length)
      lines.push(
        `Statements usually logged that went silent around ${isoOfUs(t.us)}:`,
        ...silent.map((x) => silentLine(x, settings.silent_window_s)),
      );
    if (silentNote) lines.push(silentNote);
    const data: SearchLogsData = {
      component: target.name,
      level: target.level,
      timestamp_us: t.us,
      window_s: 2 * settings.log_delta_s,
      templates: kept,
      omitted: all.length - kept.length,
      silent,
    };
    const named = [...kept.flatMap((k) => [...k.services, ...k.pods]), ...silent.flatMap((x) => [x.service, ...x.pods])];
    return okObservation(settings, lines.join('\n'), data, [target.name, ...named], !!(note || silentNote));
  },
});
