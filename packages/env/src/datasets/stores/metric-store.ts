/**
 * Metric series by component. Asking for a service also returns the series of its pods,
 * since faults are injected into pods but models usually name the service.
 */
import type { Level, MetricSeries, MetricStore } from '../../types';

export interface MetricSeriesData {
  component: string;
  level: Level;
  name: string;
  ts: number[];
  values: number[];
}

export class IndexedMetricStore implements MetricStore {
  private readonly byComponent = new Map<string, MetricSeries[]>();

  constructor(
    data: MetricSeriesData[],
    private readonly podsOfService: (service: string) => string[],
  ) {
    for (const d of data) {
      const s: MetricSeries = { ...d, ts: Float64Array.from(d.ts), values: Float64Array.from(d.values) };
      const list = this.byComponent.get(d.component) ?? [];
      list.push(s);
      this.byComponent.set(d.component, list);
    }
  }

  series(component: string): MetricSeries[] {
    const own = this.byComponent.get(component) ?? [];
    const pods = this.podsOfService(component).filter((p) => p !== component);
    return [...own, ...pods.flatMap((p) => this.byComponent.get(p) ?? [])];
  }

  components(): string[] {
    return [...this.byComponent.keys()].sort();
  }
}

/** Series as numbers for the on-disk form, sorted by time. */
export function seriesData(component: string, level: Level, name: string, points: [number, number][]): MetricSeriesData {
  points.sort((a, b) => a[0] - b[0]);
  return { component, level, name, ts: points.map((p) => p[0]), values: points.map((p) => p[1]) };
}
