/**
 * search_fluctuating_metrics(service_name, timestamp): every metric of the component (and its
 * pods and node) whose values in [t - delta, t + delta] break the n-sigma band of its baseline
 * window (ThinkFL Eq. 6-7), with the deviation in sigmas.
 */
import { boundItems, errorObservation, okObservation, shown } from './bound';
import { fluctuationWindow, measureFluctuation, type Fluctuation } from './fluctuation';
import { registerTool, resolveComponent, unknownComponentError } from './registry';
import { isoOfUs, parseTimestamp } from './timestamp';
import { componentAtTimeArgs, componentAtTimeCanonical, componentAtTimeNames } from './component-args';

export type MetricFluctuation = Fluctuation;

export interface SearchMetricsData {
  component: string;
  level: 'service' | 'pod' | 'node';
  timestamp_us: number;
  /** Series judged (with inspected values and enough baseline). */
  checked: number;
  /** Series that break the band, largest |deviation| first (bounded by the item limit). */
  fluctuating: MetricFluctuation[];
  omitted: number;
}

const args = componentAtTimeArgs;

const num = (v: number) => (Number.isInteger(v) ? String(v) : v.toPrecision(4).replace(/\.?0+$/, ''));

function line(f: MetricFluctuation): string {
  const dev = f.max_deviation_sigma;
  return (
    `- ${f.component} (${f.level}) ${f.metric}: mean ${num(f.mean)} std ${num(f.std)}; ` +
    `peak ${num(f.peak_value)} at ${isoOfUs(f.peak_ts * 1e6).slice(11, 19)} (${dev >= 0 ? '+' : ''}${dev.toFixed(1)} sigma); ` +
    `values ${f.values.map(num).join(' ')}`
  );
}

registerTool({
  name: 'search_fluctuating_metrics',
  description:
    'Metrics of a service (with its pods and node), a pod or a node that broke the n-sigma band of their regular values around a time; each gives the regular mean and std, the peak deviation in sigmas and the values around the time.',
  args,
  terminal: false,
  canonical: componentAtTimeCanonical,
  argComponents: componentAtTimeNames,
  run(ctx, a) {
    const { settings, dataset } = ctx;
    const target = resolveComponent(ctx, a.service_name);
    if (!target) return errorObservation(settings, unknownComponentError(ctx, a.service_name));
    const t = parseTimestamp(a.timestamp, settings.timestamp_formats);
    if (!t.ok) return errorObservation(settings, t.error, [target.name]);
    const w = fluctuationWindow(settings, t.us / 1e6);
    // A service's series may include its pods' series: judge each series once.
    const series = new Map(
      [target.name, ...target.related].flatMap((c) => dataset.metrics.series(c)).map((s) => [`${s.component}|${s.name}`, s]),
    );
    const measured = [...series.values()].map((s) => measureFluctuation(s, w)).filter((f): f is Fluctuation => f !== undefined);
    const breaking = measured
      .filter((f) => Math.abs(f.max_deviation_sigma) > settings.n_sigma)
      .sort((x, y) => Math.abs(y.max_deviation_sigma) - Math.abs(x.max_deviation_sigma));
    const { shown: kept, note } = boundItems(breaking, settings.max_items, 'fluctuating metrics');
    const head = `Metrics of ${target.level} ${target.name} around ${isoOfUs(t.us)} (±${settings.metric_delta_s}s vs ±${settings.baseline_window_s}s baseline, ${settings.n_sigma} sigma):`;
    const lines = [head];
    if (measured.length === 0) lines.push(`No metric values of ${shown(a.service_name)} in this window.`);
    else if (kept.length === 0) lines.push(`None of ${measured.length} metric series broke the band.`);
    else lines.push(`${breaking.length} of ${measured.length} metric series broke the band:`, ...kept.map(line));
    if (note) lines.push(note);
    const data: SearchMetricsData = {
      component: target.name,
      level: target.level,
      timestamp_us: t.us,
      checked: measured.length,
      fluctuating: kept,
      omitted: breaking.length - kept.length,
    };
    return okObservation(settings, lines.join('\n'), data, [target.name, ...kept.map((f) => f.component)], !!note);
  },
});
