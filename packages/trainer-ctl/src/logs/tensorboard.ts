/**
 * TensorBoard event files written directly: TFRecord framing (length, masked CRC-32C of the
 * length, the record, masked CRC-32C of the record) around `tensorflow.Event` protocol
 * buffers (file_version, then one Summary of simple_value scalars per step), so that
 * `tensorboard --logdir RUN_DIR/tensorboard` shows a run without TensorFlow on this side.
 */
import { appendFileSync, mkdirSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';

/** CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum TFRecord uses. */
const CRC32C_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

export function crc32c(data: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of data) c = CRC32C_TABLE[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** TFRecord's masked CRC: rotate right by 15 bits and add a constant, so CRCs of CRCs stay useful. */
export function maskedCrc32c(data: Uint8Array): number {
  const c = crc32c(data);
  return (((c >>> 15) | (c << 17)) + 0xa282ead8) >>> 0;
}

/** One TFRecord: uint64 length, uint32 masked CRC of the length bytes, data, uint32 masked CRC of data (little-endian). */
export function tfRecord(data: Uint8Array): Buffer {
  const head = Buffer.alloc(12);
  head.writeBigUInt64LE(BigInt(data.length), 0);
  head.writeUInt32LE(maskedCrc32c(head.subarray(0, 8)), 8);
  const tail = Buffer.alloc(4);
  tail.writeUInt32LE(maskedCrc32c(data), 0);
  return Buffer.concat([head, data, tail]);
}

// Protocol-buffer wire format: the few field kinds an Event needs.
function varint(n: number | bigint): Buffer {
  let v = BigInt(n);
  if (v < 0n) v += 1n << 64n; // int64 negatives take ten bytes, as protobuf writes them
  const out: number[] = [];
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) b |= 0x80;
    out.push(b);
  } while (v > 0n);
  return Buffer.from(out);
}
const key = (field: number, wire: number) => varint((field << 3) | wire);
const lenField = (field: number, bytes: Uint8Array) => Buffer.concat([key(field, 2), varint(bytes.length), bytes]);
const stringField = (field: number, s: string) => lenField(field, Buffer.from(s, 'utf8'));
function doubleField(field: number, x: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeDoubleLE(x, 0);
  return Buffer.concat([key(field, 1), b]);
}
function floatField(field: number, x: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeFloatLE(x, 0);
  return Buffer.concat([key(field, 5), b]);
}

/** Event { wall_time = 1 (double); step = 2 (int64); file_version = 3 | summary = 5 | session_log = 7 }. */
function event(wallTime: number, step: number, what: Buffer): Buffer {
  return Buffer.concat([doubleField(1, wallTime), key(2, 0), varint(step), what]);
}

/** Summary { repeated Value value = 1 }, Value { tag = 1; simple_value = 2 (float) }. */
function summary(scalars: Record<string, number>): Buffer {
  const values = Object.entries(scalars).map(([tag, v]) => lenField(1, Buffer.concat([stringField(1, tag), floatField(2, v)])));
  return lenField(5, Buffer.concat(values));
}

/** SessionLog { status = 1 (enum, START = 1) }: TensorBoard drops the events at or after its step (a resumed run's replayed steps). */
const sessionStart = (): Buffer => lenField(7, Buffer.concat([key(1, 0), varint(1)]));

export const TENSORBOARD_DIR = 'tensorboard';

/** Appends scalar summaries to one event file under RUN_DIR/tensorboard (one file per process that writes). */
export class EventFileWriter {
  readonly file: string;

  constructor(
    dir: string,
    private readonly now: () => number = Date.now,
  ) {
    mkdirSync(dir, { recursive: true });
    const secs = Math.floor(now() / 1000);
    this.file = join(dir, `events.out.tfevents.${secs}.${hostname()}.${process.pid}`);
    writeFileSync(this.file, tfRecord(event(now() / 1000, 0, stringField(3, 'brain.Event:2'))));
  }

  /** One step's scalars (tag -> value; NaN and infinities are written as they are). */
  scalars(step: number, values: Record<string, number>): void {
    if (Object.keys(values).length === 0) return;
    appendFileSync(this.file, tfRecord(event(this.now() / 1000, step, summary(values))));
  }

  /** Marks a restart at `step`: what an earlier process logged from this step on is superseded. */
  restart(step: number): void {
    appendFileSync(this.file, tfRecord(event(this.now() / 1000, step, sessionStart())));
  }
}
