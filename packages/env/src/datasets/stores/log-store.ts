/**
 * Log records (info, warn, error) by component, time-ordered for range queries, with templates
 * and each service's usual template rates.
 */
import type { LogLevel, LogRecord, LogStore, LogTemplate } from '../../types';

export interface LogData {
  templates: LogTemplate[];
  records: LogRecord[];
  /** service -> template id -> lines per minute where that service is not at fault. */
  rates: Record<string, Record<string, number>>;
}

function lowerBound(recs: LogRecord[], tsUs: number): number {
  let lo = 0;
  let hi = recs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (recs[mid].ts_us < tsUs) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export class IndexedLogStore implements LogStore {
  private readonly byComponent = new Map<string, LogRecord[]>();
  private readonly templates: LogTemplate[];

  constructor(private readonly data: LogData) {
    this.templates = data.templates;
    const add = (k: string, r: LogRecord) => {
      const l = this.byComponent.get(k) ?? [];
      l.push(r);
      this.byComponent.set(k, l);
    };
    for (const r of data.records) {
      add(r.service, r);
      if (r.pod !== r.service) add(r.pod, r);
    }
    for (const l of this.byComponent.values()) l.sort((a, b) => a.ts_us - b.ts_us);
  }

  query(component: string, fromUs: number, toUs: number, levels?: LogLevel[]): LogRecord[] {
    const recs = this.byComponent.get(component) ?? [];
    const out: LogRecord[] = [];
    for (let i = lowerBound(recs, fromUs); i < recs.length && recs[i].ts_us <= toUs; i++) {
      if (!levels || levels.includes(recs[i].level)) out.push(recs[i]);
    }
    return out;
  }

  template(id: number): LogTemplate | undefined {
    return this.templates[id];
  }

  /** 0 for a template never seen where the service was healthy; undefined without any healthy window. */
  baselineRate(service: string, templateId: number): number | undefined {
    const r = this.data.rates[service];
    if (!r) return undefined;
    return r[String(templateId)] ?? 0;
  }

  usualTemplates(service: string): { templateId: number; ratePerMin: number }[] {
    return Object.entries(this.data.rates[service] ?? {}).map(([id, ratePerMin]) => ({ templateId: Number(id), ratePerMin }));
  }
}

/**
 * Lines per minute of each (service, template) counted in the fault windows whose faulty
 * service is another one.
 */
export function healthyRates(
  records: LogRecord[],
  windows: { startUs: number; endUs: number; service?: string }[],
  services: string[],
): LogData['rates'] {
  const rates: LogData['rates'] = {};
  for (const service of services) {
    const healthy = windows.filter((w) => w.service !== service);
    const minutes = healthy.reduce((m, w) => m + (w.endUs - w.startUs) / 60e6, 0);
    if (minutes <= 0) continue;
    const counts: Record<string, number> = {};
    for (const r of records) {
      if (r.service !== service) continue;
      if (healthy.some((w) => r.ts_us >= w.startUs && r.ts_us <= w.endUs)) counts[r.template_id] = (counts[r.template_id] ?? 0) + 1;
    }
    for (const k of Object.keys(counts)) counts[k] /= minutes;
    rates[service] = counts;
  }
  return rates;
}
