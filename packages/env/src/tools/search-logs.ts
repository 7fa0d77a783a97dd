/**
 * search_logs(service_name, timestamp): error and warning lines around t grouped into
 * templates with counts, each rate compared with the service's fault-free rate.
 */
import type { LogLevel, LogRecord } from '../types';
import { boundItems, errorObservation, okObservation } from './bound';
import { registerTool, resolveComponent, unknownComponentError, type ToolContext } from './registry';
import { isoOfUs, parseTimestamp } from './timestamp';
import { componentAtTimeArgs } from './component-args';

export interface LogTemplateCount {
  templateId: number;
  template: string;
  level: LogLevel;
  count: number;
  /** Lines per minute in the window. */
  ratePerMin: number;
  /** Usual lines per minute of this template for the service; undefined without baseline. */
  baselineRatePerMin?: number;
  /** ratePerMin / baselineRatePerMin; undefined when that rate is unknown or 0. */
  ratio?: number;
  /** The usual rate is known and 0: the template is new under the fault. */
  unseenInBaseline: boolean;
  services: string[];
  pods: string[];
}

export interface SearchLogsData {
  component: string;
  level: 'service' | 'pod' | 'node';
  timestampUs: number;
  windowS: number;
  templates: LogTemplateCount[];
  omitted: number;
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
    const k = `${r.templateId}|${r.level}`;
    const list = byKey.get(k);
    if (list) list.push(r);
    else byKey.set(k, [r]);
  }
  return [...byKey.values()].map((rs) => {
    const first = rs[0];
    const services = [...new Set(rs.map((r) => r.service))].sort();
    const ratePerMin = rs.length / minutes;
    const base = services
      .map((s) => ctx.dataset.logs.baselineRate(s, first.templateId))
      .filter((v): v is number => v !== undefined);
    const baselineRatePerMin = base.length ? base.reduce((a, b) => a + b, 0) : undefined;
    const ratio = baselineRatePerMin ? ratePerMin / baselineRatePerMin : undefined;
    return {
      templateId: first.templateId,
      template: ctx.dataset.logs.template(first.templateId)?.template ?? `template ${first.templateId}`,
      level: first.level,
      count: rs.length,
      ratePerMin,
      baselineRatePerMin,
      ratio,
      unseenInBaseline: baselineRatePerMin === 0,
      services,
      pods: [...new Set(rs.map((r) => r.pod))].sort(),
    };
  });
}

/** Most unusual first: rate above the usual rate, unknown baselines counted in full. */
const excess = (t: LogTemplateCount) => t.ratePerMin - (t.baselineRatePerMin ?? 0);

function line(t: LogTemplateCount): string {
  const usual =
    t.baselineRatePerMin === undefined
      ? 'no usual rate'
      : t.unseenInBaseline
        ? 'never seen in the fault-free baseline'
        : `usual ${t.baselineRatePerMin.toFixed(2)}/min, x${(t.ratio ?? 0).toFixed(1)}`;
  const text = t.template.length > 200 ? `${t.template.slice(0, 200)}...` : t.template;
  return `- [${t.level}] x${t.count} (${t.ratePerMin.toFixed(2)}/min, ${usual}) pods=${t.pods.join(',')}: ${text.replace(/\s+/g, ' ')}`;
}

registerTool({
  name: 'search_logs',
  description:
    'Error and warning log lines of a service, pod or node around a time, grouped into templates with counts and their rate compared with the usual rate.',
  args,
  terminal: false,
  argComponents(ctx, a) {
    const r = resolveComponent(ctx, a.service_name);
    return r ? [r.name] : [];
  },
  run(ctx, a) {
    const { settings } = ctx;
    const target = resolveComponent(ctx, a.service_name);
    if (!target) return errorObservation(settings, unknownComponentError(ctx, a.service_name));
    const t = parseTimestamp(a.timestamp, settings.timestampFormats);
    if (!t.ok) return errorObservation(settings, t.error, [target.name]);
    const halfUs = settings.logDeltaS * 1e6;
    const records = sources(ctx, target).flatMap((c) =>
      ctx.dataset.logs.query(c, t.us - halfUs, t.us + halfUs, ['error', 'warn']),
    );
    const all = group(ctx, records, (2 * settings.logDeltaS) / 60).sort((x, y) => excess(y) - excess(x));
    const { shown: kept, note } = boundItems(all, settings.maxItems, 'log templates');
    const lines = [`Error/warning logs of ${target.level} ${target.name} within ±${settings.logDeltaS}s of ${isoOfUs(t.us)}:`];
    if (kept.length === 0) lines.push('No error or warning lines.');
    else lines.push(`${records.length} line(s) in ${all.length} template(s):`, ...kept.map(line));
    if (note) lines.push(note);
    const data: SearchLogsData = {
      component: target.name,
      level: target.level,
      timestampUs: t.us,
      windowS: 2 * settings.logDeltaS,
      templates: kept,
      omitted: all.length - kept.length,
    };
    return okObservation(settings, lines.join('\n'), data, [target.name, ...kept.flatMap((k) => [...k.services, ...k.pods])], !!note);
  },
});
