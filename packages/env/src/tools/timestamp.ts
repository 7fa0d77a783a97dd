/** Reads the timestamps a model writes: Unix s/ms/µs/ns (by magnitude) or ISO-8601. */
import type { TimestampFormat } from './settings';

export type TimestampResult = { ok: true; us: number; format: TimestampFormat } | { ok: false; error: string };

const ISO = /^(\d{4}-\d{2}-\d{2})(?:[T ](\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?))?\s*(Z|[+-]\d{2}:?\d{2})?$/i;

/** Unit of a Unix number told apart by magnitude; seconds cover dates up to the year 5138. */
function unixUnit(x: number): { format: TimestampFormat; toUs: number } {
  const a = Math.abs(x);
  if (a < 1e11) return { format: 'unix_s', toUs: 1e6 };
  if (a < 1e14) return { format: 'unix_ms', toUs: 1e3 };
  if (a < 1e17) return { format: 'unix_us', toUs: 1 };
  return { format: 'unix_ns', toUs: 1e-3 };
}

function fromNumber(x: number, accepted: readonly TimestampFormat[]): TimestampResult {
  if (!Number.isFinite(x) || x <= 0) return { ok: false, error: `timestamp ${x} is not a positive Unix time` };
  const unit = unixUnit(x);
  if (!accepted.includes(unit.format)) {
    return { ok: false, error: `timestamp ${x} reads as ${unit.format}, which is not accepted (use ${accepted.join(', ')})` };
  }
  return { ok: true, us: Math.round(x * unit.toUs), format: unit.format };
}

function fromIso(s: string, accepted: readonly TimestampFormat[]): TimestampResult | undefined {
  const m = ISO.exec(s);
  if (!m) return undefined;
  if (!accepted.includes('iso8601')) return { ok: false, error: `ISO-8601 timestamps are not accepted (use ${accepted.join(', ')})` };
  // Dataset times are UTC: a time without offset is read as UTC, not as the host's zone.
  const text = `${m[1]}T${m[2] ?? '00:00'}${m[3] ?? 'Z'}`;
  const ms = Date.parse(text);
  if (Number.isNaN(ms)) return { ok: false, error: `timestamp "${s}" is not a valid date` };
  const frac = /\.(\d+)/.exec(m[2] ?? '');
  const subMsUs = frac ? Number(`${frac[1]}000000`.slice(3, 6)) : 0;
  return { ok: true, us: ms * 1000 + subMsUs, format: 'iso8601' };
}

export function parseTimestamp(value: unknown, accepted: readonly TimestampFormat[]): TimestampResult {
  if (typeof value === 'number') return fromNumber(value, accepted);
  if (typeof value !== 'string') return { ok: false, error: `timestamp must be a number or a string, got ${typeof value}` };
  const s = value.trim();
  if (/^\d+(\.\d+)?$/.test(s)) return fromNumber(Number(s), accepted);
  const iso = fromIso(s, accepted);
  if (iso) return iso;
  const shown = s.length > 60 ? `${s.slice(0, 60)}...` : s;
  return { ok: false, error: `cannot read timestamp "${shown}": give Unix seconds/ms/µs/ns or ISO-8601 like 2023-01-29T08:55:00Z` };
}

/** ISO-8601 UTC text of a Unix-µs time, to the millisecond. */
export function isoOfUs(us: number): string {
  return new Date(Math.floor(us / 1000)).toISOString();
}
