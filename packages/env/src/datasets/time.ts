/**
 * Time conversions. Unix nanoseconds exceed 2^53, so they are cut to microseconds as
 * strings before becoming numbers.
 */

/** Unix nanoseconds as a decimal string -> Unix microseconds (truncated). */
export function nsStringToUs(ns: string): number | undefined {
  if (!/^\d{4,}$/.test(ns)) return undefined;
  return Number(ns.slice(0, -3));
}

/** 'YYYY-MM-DD HH:MM:SS' read as UTC -> Unix seconds. */
export function utcSeconds(text: string): number | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})$/.exec(text.trim());
  if (!m) return undefined;
  const [, y, mo, d, h, mi, s] = m.map(Number);
  return Date.UTC(y, mo - 1, d, h, mi, s) / 1000;
}

/**
 * A Unix epoch in unknown unit (s, ms, µs or ns; detected by magnitude for dates after 1973)
 * -> Unix microseconds.
 */
export function epochToUs(raw: string): number | undefined {
  const t = raw.trim();
  if (!/^\d+(\.\d+)?$/.test(t)) return undefined;
  const intPart = t.split('.')[0];
  if (intPart.length >= 18) return nsStringToUs(intPart);
  const v = Number(t);
  if (v >= 1e14) return Math.round(v);
  if (v >= 1e11) return Math.round(v * 1e3);
  return Math.round(v * 1e6);
}

export function isoUs(us: number): string {
  return new Date(us / 1000).toISOString();
}

/** ISO-8601 time with up to ns fraction, read as UTC when it has no zone -> Unix microseconds. */
export function isoToUs(text: string): number | undefined {
  const m = /^(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2})(?:\.(\d+))?(Z|[+-]\d{2}:\d{2})?$/.exec(text.trim());
  if (!m) return undefined;
  const ms = Date.parse(`${m[1].replace(' ', 'T')}${m[3] ?? 'Z'}`);
  if (Number.isNaN(ms)) return undefined;
  return ms * 1000 + Number((m[2] ?? '').padEnd(6, '0').slice(0, 6));
}
