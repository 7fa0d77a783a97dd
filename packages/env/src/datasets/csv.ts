/**
 * Streaming CSV reader (RFC 4180 quoting, fields may span lines) that keeps the line number
 * of each record, so a bad row can be reported as file:line.
 */
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { DataError } from './errors';

export interface CsvRecord {
  /** 1-based line where the record starts. */
  line: number;
  fields: string[];
}

/** Splits one record; returns null when a quoted field is still open at the end of `text`. */
export function splitCsv(text: string): string[] | null {
  if (!text.includes('"')) return text.split(',');
  const out: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') {
          field += '"';
          i++;
        } else quoted = false;
      } else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') {
      out.push(field);
      field = '';
    } else field += c;
  }
  if (quoted) return null;
  out.push(field);
  return out;
}

/** Whether `text` holds whole records: an even number of quote characters. */
function balanced(text: string): boolean {
  let n = 0;
  for (let i = text.indexOf('"'); i >= 0; i = text.indexOf('"', i + 1)) n++;
  return n % 2 === 0;
}

/**
 * Yields the records of a CSV file after its header. `keep(rawText)` may skip a record before
 * it is split (a cheap prefilter for large files); it is called once per record.
 */
export async function* readCsv(file: string, keep?: (raw: string) => boolean): AsyncGenerator<CsvRecord & { header: string[] }> {
  const rl = createInterface({ input: createReadStream(file), crlfDelay: Infinity });
  let header: string[] | null = null;
  let pending = '';
  let start = 0;
  let n = 0;
  for await (const text of rl) {
    n++;
    if (!pending) start = n;
    const raw = pending ? `${pending}\n${text}` : text;
    if (!balanced(raw)) {
      pending = raw;
      continue;
    }
    pending = '';
    if (!header) {
      header = splitCsv(raw)!.map((x) => x.trim().replace(/^\uFEFF/, ''));
      continue;
    }
    if (raw === '' || (keep && !keep(raw))) continue;
    yield { line: start, fields: splitCsv(raw)!, header };
  }
  if (pending) throw new DataError(file, start, 'unterminated quoted field');
  if (!header) throw new DataError(file, 1, 'empty file: no CSV header');
}

/** Column positions of the required names; a missing one is an error naming the file. */
export function columns<K extends string>(file: string, header: string[], names: readonly K[]): Record<K, number> {
  const out = {} as Record<K, number>;
  for (const name of names) {
    const i = header.indexOf(name);
    if (i < 0) throw new DataError(file, 1, `missing column '${name}' (header: ${header.join(',')})`);
    out[name] = i;
  }
  return out;
}

/** A field that must be a finite number. */
export function numberField(file: string, rec: CsvRecord, i: number, name: string): number {
  const raw = rec.fields[i];
  const v = raw === undefined || raw.trim() === '' ? NaN : Number(raw);
  if (!Number.isFinite(v)) throw new DataError(file, rec.line, `${name} is not a number: '${raw ?? ''}'`);
  return v;
}

/** A field that must be present and non-empty. */
export function textField(file: string, rec: CsvRecord, i: number, name: string): string {
  const raw = rec.fields[i];
  if (raw === undefined || raw === '') throw new DataError(file, rec.line, `${name} is empty`);
  return raw;
}
