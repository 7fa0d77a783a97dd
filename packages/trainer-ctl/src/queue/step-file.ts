/**
 * Bulk data beside the queue: token ids, masks, log-probabilities and advantages travel in a
 * binary columnar file in the run's shared directory, and Redis carries only a reference
 * (path, size, SHA-256). The layout is safetensors (8-byte little-endian header length, a JSON
 * header of {name: {dtype, shape, data_offsets}} plus `__metadata__`, then the raw
 * little-endian buffers), so the engine reads it with a plain numpy.memmap
 * (engine/thinkfl_engine/step_file.py).
 *
 * A file is written under a temporary name, fsynced and renamed, so a path that exists holds a
 * whole file; readers check the SHA-256 of the whole file against the reference before using
 * any byte, so a torn or replaced file is refused, never read.
 *
 * A token batch holds B ragged rows concatenated: `offsets` I64 [B+1] (row i is
 * [offsets[i], offsets[i+1])), `ids` I32 [T], `mask` U8 [T], optionally `logprobs` F32 [T]
 * (behaviour log-probabilities) and `advantages` F64 [B].
 */
import { createHash } from 'node:crypto';
import { closeSync, fsyncSync, mkdirSync, openSync, readSync, renameSync, rmSync, writeSync } from 'node:fs';
import { basename, dirname } from 'node:path';

/** Where a bulk file is and how to recognise it whole. */
export interface FileRef {
  path: string;
  bytes: number;
  sha256: string;
}

/** A token-batch file: its reference and what it holds. */
export interface TokenBatchRef extends FileRef {
  rows: number;
  tokens: number;
  /** Columns beside offsets/ids/mask that the file has. */
  logprobs: boolean;
  advantages: boolean;
}

/** One row of a token batch; arrays are aligned with ids. */
export interface TokenRow {
  ids: ArrayLike<number>;
  mask: ArrayLike<number>;
  logprobs?: ArrayLike<number>;
  advantage?: number;
}

/**
 * Rows of a token batch, produced on demand: the writer walks them once per column, so a
 * caller can generate or convert rows one at a time instead of holding the batch twice.
 */
export interface TokenRowSource {
  count: number;
  row(i: number): TokenRow;
}

export const TOKEN_BATCH_FORMAT = 'thinkfl-token-batch/1';

type Dtype = 'I64' | 'I32' | 'U8' | 'F32' | 'F64';
const DTYPE_BYTES: Record<Dtype, number> = { I64: 8, I32: 4, U8: 1, F32: 4, F64: 8 };

/** One tensor of a safetensors file: its bytes are produced by `fill`, chunk by chunk. */
export interface TensorSpec {
  name: string;
  dtype: Dtype;
  shape: number[];
  /** Writes the tensor's bytes, in order, through `put`. */
  fill(put: (chunk: ArrayBufferView) => void): void;
}

/** Bytes buffered before a write to the file. */
const CHUNK_BYTES = 8 << 20;

/**
 * Writes a safetensors file atomically (temporary name, fsync, rename, fsync of the
 * directory) and returns its reference. `metadata` values are strings (the format's rule).
 */
export function writeSafetensors(path: string, tensors: readonly TensorSpec[], metadata: Record<string, string> = {}): FileRef {
  const header: Record<string, unknown> = { __metadata__: metadata };
  let offset = 0;
  for (const t of tensors) {
    const size = t.shape.reduce((a, b) => a * b, 1) * DTYPE_BYTES[t.dtype];
    header[t.name] = { dtype: t.dtype, shape: t.shape, data_offsets: [offset, offset + size] };
    offset += size;
  }
  // The header is padded with spaces to a multiple of 8 so that every tensor starts aligned.
  let json = JSON.stringify(header);
  json += ' '.repeat((8 - ((8 + Buffer.byteLength(json)) % 8)) % 8);
  const head = Buffer.alloc(8 + Buffer.byteLength(json));
  head.writeBigUInt64LE(BigInt(Buffer.byteLength(json)), 0);
  head.write(json, 8, 'utf8');

  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${dirname(path)}/.${basename(path)}.tmp-${process.pid}`;
  const fd = openSync(tmp, 'w');
  const hash = createHash('sha256');
  const buf = Buffer.allocUnsafe(CHUNK_BYTES);
  let used = 0;
  let total = 0;
  const flush = () => {
    if (used === 0) return;
    writeSync(fd, buf, 0, used);
    hash.update(buf.subarray(0, used));
    total += used;
    used = 0;
  };
  const put = (chunk: ArrayBufferView) => {
    let src = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    while (src.length > 0) {
      const n = Math.min(src.length, CHUNK_BYTES - used);
      src.copy(buf, used, 0, n);
      used += n;
      src = src.subarray(n);
      if (used === CHUNK_BYTES) flush();
    }
  };
  try {
    put(head);
    for (const t of tensors) {
      const before = total + used;
      t.fill(put);
      const want = (header[t.name] as { data_offsets: number[] }).data_offsets;
      if (total + used - before !== want[1] - want[0]) {
        throw new Error(`${path}: tensor ${t.name} wrote ${total + used - before} bytes, its shape needs ${want[1] - want[0]}`);
      }
    }
    flush();
    fsyncSync(fd);
  } catch (e) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw e;
  }
  closeSync(fd);
  renameSync(tmp, path);
  const dirFd = openSync(dirname(path), 'r');
  try {
    fsyncSync(dirFd);
  } finally {
    closeSync(dirFd);
  }
  return { path, bytes: total, sha256: hash.digest('hex') };
}

/** SHA-256 of a whole file, read in chunks. */
export function fileSha256(path: string): { sha256: string; bytes: number } {
  const fd = openSync(path, 'r');
  const hash = createHash('sha256');
  const buf = Buffer.allocUnsafe(CHUNK_BYTES);
  let bytes = 0;
  try {
    for (;;) {
      const n = readSync(fd, buf, 0, buf.length, null);
      if (n === 0) break;
      hash.update(buf.subarray(0, n));
      bytes += n;
    }
  } finally {
    closeSync(fd);
  }
  return { sha256: hash.digest('hex'), bytes };
}

export class StepFileError extends Error {
  override name = 'StepFileError';
}

/** Throws unless the file is the one the reference names (same size and SHA-256). */
export function verifyFile(ref: FileRef): void {
  let got: { sha256: string; bytes: number };
  try {
    got = fileSha256(ref.path);
  } catch (e) {
    throw new StepFileError(`${ref.path}: cannot read (${(e as Error).message})`);
  }
  if (got.bytes !== ref.bytes || got.sha256 !== ref.sha256) {
    throw new StepFileError(`${ref.path}: ${got.bytes} bytes with sha256 ${got.sha256}; the reference says ${ref.bytes} bytes with sha256 ${ref.sha256} (torn or replaced file)`);
  }
}

export interface SafetensorsContent {
  metadata: Record<string, string>;
  tensors: Record<string, { dtype: Dtype; shape: number[]; data: Buffer }>;
}

/** Reads a small safetensors file whole, after checking it against its reference. */
export function readSafetensors(ref: FileRef): SafetensorsContent {
  const fd = openSync(ref.path, 'r');
  let all: Buffer;
  try {
    all = Buffer.allocUnsafe(ref.bytes);
    let at = 0;
    while (at < ref.bytes) {
      const n = readSync(fd, all, at, ref.bytes - at, at);
      if (n === 0) break;
      at += n;
    }
    if (at !== ref.bytes || readSync(fd, Buffer.alloc(1), 0, 1, at) !== 0) {
      throw new StepFileError(`${ref.path}: size differs from the reference's ${ref.bytes} bytes (torn or replaced file)`);
    }
  } finally {
    closeSync(fd);
  }
  const sha = createHash('sha256').update(all).digest('hex');
  if (sha !== ref.sha256) throw new StepFileError(`${ref.path}: sha256 ${sha}, the reference says ${ref.sha256} (torn or replaced file)`);
  const n = Number(all.readBigUInt64LE(0));
  const header = JSON.parse(all.subarray(8, 8 + n).toString('utf8')) as Record<string, { dtype: Dtype; shape: number[]; data_offsets: [number, number] }>;
  const out: SafetensorsContent = { metadata: (header.__metadata__ as unknown as Record<string, string>) ?? {}, tensors: {} };
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    out.tensors[name] = { dtype: t.dtype, shape: t.shape, data: all.subarray(8 + n + t.data_offsets[0], 8 + n + t.data_offsets[1]) };
  }
  return out;
}

/** A column of `len` values written from typed arrays of `Ctor`, converted one row at a time. */
function rowColumn(
  name: string,
  dtype: Dtype,
  len: number,
  rows: TokenRowSource,
  pick: (r: TokenRow, i: number) => ArrayLike<number>,
  Ctor: Int32ArrayConstructor | Uint8ArrayConstructor | Float32ArrayConstructor,
): TensorSpec {
  return {
    name,
    dtype,
    shape: [len],
    fill(put) {
      for (let i = 0; i < rows.count; i++) {
        const a = pick(rows.row(i), i);
        put(a instanceof Ctor ? a : Ctor.from(a));
      }
    },
  };
}

/**
 * Writes B rows as a token-batch file and returns its reference. Checks every row first:
 * mask and log-probabilities aligned with ids, mask values 0/1, ids non-negative int32, and
 * log-probabilities and advantages given for all rows or none.
 */
export function writeTokenBatch(path: string, rows: TokenRowSource, opts: { where?: string; metadata?: Record<string, string> } = {}): TokenBatchRef {
  const where = opts.where ?? path;
  if (rows.count === 0) throw new Error(`${where}: no rows`);
  const offsets = new BigInt64Array(rows.count + 1);
  const advantages = new Float64Array(rows.count);
  let withLogprobs = 0;
  let withAdvantage = 0;
  for (let i = 0; i < rows.count; i++) {
    const r = rows.row(i);
    const n = r.ids.length;
    if (r.mask.length !== n) throw new Error(`${where}: row ${i}: mask has ${r.mask.length} entries for ${n} ids`);
    if (r.logprobs && r.logprobs.length !== n) throw new Error(`${where}: row ${i}: logprobs has ${r.logprobs.length} entries for ${n} ids`);
    for (let k = 0; k < n; k++) {
      const id = r.ids[k];
      if (!Number.isInteger(id) || id < 0 || id > 0x7fffffff) throw new Error(`${where}: row ${i}: token id ${id} at ${k} is not a non-negative int32`);
      const m = r.mask[k];
      if (m !== 0 && m !== 1) throw new Error(`${where}: row ${i}: mask value ${m} at ${k} (0 or 1)`);
    }
    if (r.logprobs) withLogprobs++;
    if (r.advantage !== undefined) {
      if (!Number.isFinite(r.advantage)) throw new Error(`${where}: row ${i}: advantage ${r.advantage} is not finite`);
      advantages[i] = r.advantage;
      withAdvantage++;
    }
    offsets[i + 1] = offsets[i] + BigInt(n);
  }
  for (const [what, c] of [['logprobs', withLogprobs], ['advantage', withAdvantage]] as const) {
    if (c !== 0 && c !== rows.count) throw new Error(`${where}: ${c} of ${rows.count} rows carry ${what}; give all or none`);
  }
  const tokens = Number(offsets[rows.count]);
  const tensors: TensorSpec[] = [
    { name: 'offsets', dtype: 'I64', shape: [rows.count + 1], fill: (put) => put(offsets) },
    rowColumn('ids', 'I32', tokens, rows, (r) => r.ids, Int32Array),
    rowColumn('mask', 'U8', tokens, rows, (r) => r.mask, Uint8Array),
  ];
  if (withLogprobs) tensors.push(rowColumn('logprobs', 'F32', tokens, rows, (r) => r.logprobs!, Float32Array));
  if (withAdvantage) {
    tensors.push({ name: 'advantages', dtype: 'F64', shape: [rows.count], fill: (put) => put(advantages) });
  }
  const ref = writeSafetensors(path, tensors, { ...opts.metadata, format: TOKEN_BATCH_FORMAT });
  return { ...ref, rows: rows.count, tokens, logprobs: withLogprobs > 0, advantages: withAdvantage > 0 };
}

/** Typed views of a token batch read whole (small files: one trajectory). */
export interface TokenBatchColumns {
  offsets: number[];
  ids: Int32Array;
  mask: Uint8Array;
  logprobs?: Float32Array;
  advantages?: Float64Array;
  metadata: Record<string, string>;
}

const view = <T>(Ctor: { new (b: ArrayBuffer, o: number, n: number): T; BYTES_PER_ELEMENT: number }, data: Buffer): T => {
  // Copy into a fresh, aligned buffer: a view straight into the file's buffer may be misaligned.
  const copy = new Uint8Array(data.length);
  copy.set(data);
  return new Ctor(copy.buffer, 0, data.length / Ctor.BYTES_PER_ELEMENT);
};

export function readTokenBatch(ref: FileRef): TokenBatchColumns {
  const f = readSafetensors(ref);
  if (f.metadata.format !== TOKEN_BATCH_FORMAT) throw new StepFileError(`${ref.path}: format ${f.metadata.format ?? '(none)'}, expected ${TOKEN_BATCH_FORMAT}`);
  const t = f.tensors;
  return {
    offsets: Array.from(view(BigInt64Array, t.offsets.data), Number),
    ids: view(Int32Array, t.ids.data),
    mask: view(Uint8Array, t.mask.data),
    ...(t.logprobs && { logprobs: view(Float32Array, t.logprobs.data) }),
    ...(t.advantages && { advantages: view(Float64Array, t.advantages.data) }),
    metadata: f.metadata,
  };
}
