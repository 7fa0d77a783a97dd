/**
 * Property: whatever random truncation or byte flips hit one input file, an import ends in a
 * dataset or in a DataError naming that file and a line no later than the last damage (or the
 * next line holding anything after it, where a reader notices a lost separator);
 * nothing crashes. Inputs are real rows of the Nezha 2023-01-29 data: as they are for the
 * nezha importer, converted to the aiops2022 CSV tables and to OTLP/JSON (one export per line
 * and one pretty-printed document) for the other two. Seeded, so a failure replays.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { damagedCopy } from '../../../testkit/nezha';
import { realRowSources, type RealRowSource } from '../../../testkit/real-rows';
import { DataError, importDataset } from '../src/datasets/index';
import { prng } from '../../../testkit/prng';

const RUNS = 40;

/** Line of byte `at`, counting every kind of line break (as readline does). */
function lineOf(buf: Buffer, at: number): number {
  let n = 1;
  for (let i = 0; i < at && i < buf.length; i++) {
    if (buf[i] === 0x0a) n++;
    else if (buf[i] === 0x0d && buf[i + 1] !== 0x0a) n++;
  }
  return n;
}

const BYTES = [...'",\n:{}[]0a-'].map((c) => c.charCodeAt(0));

/** A random truncation (kept 1..n-1 bytes) or 1-3 byte flips; with the last line it touched. */
function damage(buf: Buffer, rnd: () => number): { out: Buffer; lastLine: number; what: string } {
  if (rnd() < 0.4) {
    const keep = 1 + Math.floor(rnd() * (buf.length - 1));
    return { out: buf.subarray(0, keep), lastLine: lineOf(buf, keep - 1), what: `truncated to ${keep} bytes` };
  }
  const out = Buffer.from(buf);
  const flips: string[] = [];
  let last = 0;
  for (let k = 1 + Math.floor(rnd() * 3); k > 0; k--) {
    const at = Math.floor(rnd() * out.length);
    out[at] = rnd() < 0.5 ? BYTES[Math.floor(rnd() * BYTES.length)] : Math.floor(rnd() * 256);
    flips.push(`${at}=0x${out[at].toString(16)}`);
    last = Math.max(last, at);
  }
  // A reader sees damage at the next token at the latest: a flipped-in line break or a lost comma shows on the next line that holds anything.
  let next = last + 1;
  while (next < out.length && ' \t\r\n'.includes(String.fromCharCode(out[next]))) next++;
  return { out, lastLine: Math.max(lineOf(buf, last), lineOf(out, next)), what: `bytes ${flips.join(' ')}` };
}

let raw: string;
let work: string;
let sources: Record<string, RealRowSource>;

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'fuzz-'));
  ({ raw, sources } = realRowSources(work));
});
afterAll(() => {
  for (const d of [raw, work]) rmSync(d, { recursive: true, force: true });
});

describe.each(['nezha', 'aiops2022', 'otlp'])('%s readers under random damage to real rows', (format) => {
  it('import the undamaged rows into a dataset with cases', async () => {
    const { src, settings } = sources[format];
    const d = await importDataset({ format, src, out: join(work, `${format}-clean`), settings });
    expect(d.traces.size).toBeGreaterThan(100);
    expect(d.cases.length).toBeGreaterThan(0);
  });

  it(`end ${RUNS} damaged imports in a dataset or an error naming the damaged file and line`, async () => {
    const { src, files, settings } = sources[format];
    const rnd = prng(0x5eed + format.length);
    const outcomes = { dataset: 0, error: 0 };
    for (let run = 0; run < RUNS; run++) {
      const rel = files[Math.floor(rnd() * files.length)];
      const { out, lastLine, what } = damage(readFileSync(join(src, rel)), rnd);
      const copy = damagedCopy(src, { write: { [rel]: out } });
      const where = `run ${run}: ${rel} ${what}`;
      try {
        await importDataset({ format, src: copy, out: join(copy, 'out'), settings });
        outcomes.dataset++;
      } catch (e) {
        if (!(e instanceof DataError)) throw new Error(`${where}: not a file:line error: ${(e as Error).stack}`);
        expect(e.file, where).toBe(join(copy, rel));
        expect(e.line, `${where}: ${e.message}`).toBeGreaterThanOrEqual(1);
        expect(e.line, `${where}: ${e.message}`).toBeLessThanOrEqual(lastLine);
        expect(e.message.startsWith(`${e.file}:${e.line}: `), where).toBe(true);
        outcomes.error++;
      }
      rmSync(copy, { recursive: true, force: true });
    }
    expect(outcomes.dataset).toBeGreaterThan(0);
    expect(outcomes.error).toBeGreaterThan(0);
  });
});
