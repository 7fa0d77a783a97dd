/**
 * Stores built the first time they are asked: many processes that load a dataset never search
 * its logs or metrics (a rollout worker's episodes often do not), and parsing and indexing those
 * two parts costs about 0.6 s of CPU and 76 MB of heap a load (docs/experiments.md, "The CI run's length" 5).
 */
import type { LogLevel, LogRecord, LogStore, LogTemplate, MetricSeries, MetricStore } from '../../types';

function once<T>(make: () => T): () => T {
  let made: { v: T } | undefined;
  return () => (made ??= { v: make() }).v;
}

export class LazyLogStore implements LogStore {
  private readonly store: () => LogStore;

  constructor(make: () => LogStore) {
    this.store = once(make);
  }

  query(component: string, fromUs: number, toUs: number, levels?: LogLevel[]): LogRecord[] {
    return this.store().query(component, fromUs, toUs, levels);
  }

  template(id: number): LogTemplate | undefined {
    return this.store().template(id);
  }

  baselineRate(service: string, templateId: number): number | undefined {
    return this.store().baselineRate(service, templateId);
  }

  usualTemplates(service: string): { templateId: number; ratePerMin: number }[] {
    return this.store().usualTemplates(service);
  }
}

export class LazyMetricStore implements MetricStore {
  private readonly store: () => MetricStore;

  constructor(make: () => MetricStore) {
    this.store = once(make);
  }

  series(component: string): MetricSeries[] {
    return this.store().series(component);
  }

  components(): string[] {
    return this.store().components();
  }
}
