/**
 * Bulk data beside the queue: token ids, masks, log-probabilities and advantages travel in a
 * binary columnar file in the run's shared directory, and Redis carries only a reference
 * (path, size, checksum). The layout is safetensors (8-byte little-endian header length, a JSON
 * header of {name: {dtype, shape, data_offsets}} plus `__metadata__`, then the raw
 * little-endian buffers), so the engine reads it with a plain numpy.memmap
 * (engine/thinkfl_engine/step_file.py).
 *
 * A token batch is a sequence of blocks (TokenBatchWriter), each a few ragged rows
 * concatenated: row i of block k is [offsets[i], offsets[i+1]) of its ids, mask and
 * log-probabilities. A step's train file gets one block per group, written while the rollout
 * still runs; a trajectory file is one block of one row.
 *
 * A file is written under a temporary name, fsynced and renamed, so a path that exists holds a
 * whole file; readers check its checksum against the reference before using any byte, so a
 * torn or replaced file is refused, never read.
 */
import { createHash, randomUUID } from 'node:crypto';
import { closeSync, fdatasyncSync, fstatSync, fsyncSync, mkdirSync, openSync, readSync, renameSync, rmSync, writeSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { asDiskError, writing } from '../disk-errors';

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

/** Bytes buffered before a write to the file. */
const CHUNK_BYTES = 8 << 20;
/** Header bytes reserved per block (its five tensor entries) and for the rest of the header. */
const HEADER_PER_BLOCK = 640;
const HEADER_BASE = 512;
/** Bytes appended between two flushes to disk. */
const SYNC_BYTES = 16 << 20;

const digestOf = (parts: Buffer[]) => {
  const h = createHash('sha256');
  for (const p of parts) h.update(p);
  return h.digest('hex');
};

/** One tensor of a block: its header entry, and how its bytes are put into the file. */
interface BlockTensor {
  name: string;
  dtype: Dtype;
  shape: number[];
  fill(put: (c: ArrayBufferView) => void): void;
}

/**
 * Checks a block's rows (see TokenBatchWriter.append) and measures them: their offsets into
 * the block's tokens, their advantages, and which optional columns they carry.
 */
function measureRows(rows: TokenRowSource, where: string) {
  const offsets = new BigInt64Array(rows.count + 1);
  const advantages = new Float64Array(rows.count);
  let withLogprobs = 0;
  let withAdvantage = 0;
  for (let i = 0; i < rows.count; i++) {
    const r = rows.row(i);
    const n = r.ids.length;
    if (r.mask.length !== n) throw new Error(`${where}: row ${i}: mask has ${r.mask.length} entries for ${n} ids`);
    if (r.logprobs && r.logprobs.length !== n)
      throw new Error(`${where}: row ${i}: logprobs has ${r.logprobs.length} entries for ${n} ids`);
    for (let k = 0; k < n; k++) {
      const id = r.ids[k];
      if (!Number.isInteger(id) || id < 0 || id > 0x7fffffff)
        throw new Error(`${where}: row ${i}: token id ${id} at ${k} is not a non-negative int32`);
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
  for (const [what, c] of [
    ['logprobs', withLogprobs],
    ['advantage', withAdvantage],
  ] as const) {
    if (c !== 0 && c !== rows.count) throw new Error(`${where}: ${c} of ${rows.count} rows carry ${what}; give all or none`);
  }
  return { offsets, advantages, cols: { logprobs: withLogprobs > 0, advantages: withAdvantage > 0 } };
}

/**
 * Writes a token batch block by block: each block is a few rows (a group) appended as soon as
 * it is ready, so the file is mostly written before the last rows arrive. The header (written
 * last, into space reserved at the start) lists each block's tensors `b<k>.offsets` (I64
 * [n+1], from 0), `b<k>.advantages` (F64 [n]), `b<k>.ids` (I32 [t]), `b<k>.logprobs` (F32 [t])
 * and `b<k>.mask` (U8 [t]). The file's checksum is the SHA-256 of the SHA-256 digests of the
 * header and of each block, in file order: blocks are hashed as they are written. Nothing is
 * visible under `path` until finish() has fsynced and renamed the whole file.
 */
export class TokenBatchWriter {
  private readonly tmp: string;
  private readonly fd: number;
  private readonly reserve: number;
  private readonly header: Record<string, unknown>;
  private readonly digests: Buffer[] = [];
  private blocks = 0;
  private rows = 0;
  private tokens = 0;
  private data = 0;
  private unsynced = 0;
  /** Staging buffer of the writes, reused by every block. */
  private buf?: Buffer;
  private columns?: { logprobs: boolean; advantages: boolean };
  private closed = false;

  constructor(
    readonly path: string,
    opts: { reserveBlocks?: number; metadata?: Record<string, string> } = {},
  ) {
    this.header = { __metadata__: { ...opts.metadata, format: TOKEN_BATCH_FORMAT } };
    const meta = Buffer.byteLength(JSON.stringify(this.header));
    this.reserve = Math.ceil((HEADER_BASE + meta + HEADER_PER_BLOCK * (opts.reserveBlocks ?? 1)) / 8) * 8;
    mkdirSync(dirname(path), { recursive: true });
    this.tmp = `${dirname(path)}/.${basename(path)}.tmp-${process.pid}-${randomUUID().slice(0, 8)}`;
    this.fd = openSync(this.tmp, 'w');
  }

  /** Rows appended so far. */
  get rowCount(): number {
    return this.rows;
  }

  /** Whether another block still fits the header space reserved for it. */
  get full(): boolean {
    return this.headerBytes(this.blocks + 1) > this.reserve;
  }

  /**
   * Appends rows as one block. Checks every row first: mask and log-probabilities aligned with
   * ids, mask values 0/1, ids non-negative int32, log-probabilities and advantages given for all
   * rows of the file or none.
   */
  append(rows: TokenRowSource, where = this.path): void {
    if (this.closed) throw new Error(`${this.path}: written already`);
    if (rows.count === 0) throw new Error(`${where}: no rows`);
    if (this.full) throw new Error(`${this.path}: header space for ${this.blocks} blocks is used up`);
    const { offsets, advantages, cols } = measureRows(rows, where);
    this.columns ??= cols;
    if (cols.logprobs !== this.columns.logprobs || cols.advantages !== this.columns.advantages) {
      throw new Error(
        `${where}: logprobs/advantages ${cols.logprobs}/${cols.advantages}, earlier blocks ${this.columns.logprobs}/${this.columns.advantages}; give all or none`,
      );
    }
    const t = Number(offsets[rows.count]);
    const tensors: BlockTensor[] = [{ name: 'offsets', dtype: 'I64', shape: [rows.count + 1], fill: (put) => put(offsets) }];
    if (cols.advantages) tensors.push({ name: 'advantages', dtype: 'F64', shape: [rows.count], fill: (put) => put(advantages) });
    tensors.push(rowColumn('ids', 'I32', t, rows, (r) => r.ids, Int32Array));
    if (cols.logprobs) tensors.push(rowColumn('logprobs', 'F32', t, rows, (r) => r.logprobs!, Float32Array));
    tensors.push(rowColumn('mask', 'U8', t, rows, (r) => r.mask, Uint8Array));
    this.writeBlock(tensors);
    this.rows += rows.count;
    this.tokens += t;
  }

  /** Writes a block's tensors after the data so far through the staging buffer, hashing them as they go, and enters them in the header. */
  private writeBlock(tensors: BlockTensor[]): void {
    const k = this.blocks;
    const hash = createHash('sha256');
    const buf = (this.buf ??= Buffer.allocUnsafe(CHUNK_BYTES));
    let used = 0;
    let at = 8 + this.reserve + this.data;
    const flush = () => {
      if (used === 0) return;
      writeSync(this.fd, buf, 0, used, at);
      hash.update(buf.subarray(0, used));
      at += used;
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
    for (const x of tensors) {
      const size = x.shape.reduce((a, b) => a * b, 1) * DTYPE_BYTES[x.dtype];
      const from = at + used - 8 - this.reserve;
      x.fill(put);
      if (at + used - 8 - this.reserve - from !== size)
        throw new Error(`${this.path}: tensor ${x.name} wrote ${at + used - 8 - this.reserve - from} bytes, its shape needs ${size}`);
      this.header[`b${k}.${x.name}`] = { dtype: x.dtype, shape: x.shape, data_offsets: [from, from + size] };
    }
    flush();
    // Flushed as it goes, so that finish() waits for the last few MB only, not the whole step.
    this.unsynced += at - 8 - this.reserve - this.data;
    if (this.unsynced >= SYNC_BYTES) {
      fdatasyncSync(this.fd);
      this.unsynced = 0;
    }
    this.data = at - 8 - this.reserve;
    this.digests.push(hash.digest());
    this.blocks++;
  }

  /** Writes the header, fsyncs and renames the file into place; returns its reference. */
  finish(): TokenBatchRef {
    if (this.blocks === 0) throw new Error(`${this.path}: no rows`);
    this.closed = true;
    try {
      const json = JSON.stringify(this.header);
      const len = Buffer.byteLength(json);
      if (len > this.reserve) throw new Error(`${this.path}: header of ${len} bytes exceeds the ${this.reserve} reserved`);
      const head = Buffer.alloc(8 + this.reserve, ' ');
      head.writeBigUInt64LE(BigInt(this.reserve), 0);
      head.write(json, 8, 'utf8');
      writeSync(this.fd, head, 0, head.length, 0);
      fsyncSync(this.fd);
      closeSync(this.fd);
      renameSync(this.tmp, this.path);
      const sha256 = digestOf([Buffer.from(createHash('sha256').update(head).digest()), ...this.digests]);
      const dirFd = openSync(dirname(this.path), 'r');
      try {
        fsyncSync(dirFd);
      } finally {
        closeSync(dirFd);
      }
      return {
        path: this.path,
        bytes: 8 + this.reserve + this.data,
        sha256,
        rows: this.rows,
        tokens: this.tokens,
        logprobs: this.columns!.logprobs,
        advantages: this.columns!.advantages,
      };
    } catch (e) {
      this.abort();
      throw asDiskError(e, this.path) ?? e;
    }
  }

  /** Drops the unfinished file. */
  abort(): void {
    this.closed = true;
    try {
      closeSync(this.fd);
    } catch {
      // already closed by finish()
    }
    rmSync(this.tmp, { force: true });
  }

  private headerBytes(blocks: number): number {
    return HEADER_BASE + Buffer.byteLength(JSON.stringify(this.header.__metadata__)) + HEADER_PER_BLOCK * blocks;
  }
}

type Header = Record<string, { dtype: Dtype; shape: number[]; data_offsets: [number, number] }>;

/** Byte ranges of a token batch's blocks within its data section, in file order. */
function blockRanges(header: Header): [number, number][] {
  const ranges = new Map<number, [number, number]>();
  for (const [name, t] of Object.entries(header)) {
    const m = /^b(\d+)\./.exec(name);
    if (!m) continue;
    const k = Number(m[1]);
    const r = ranges.get(k);
    ranges.set(k, r ? [Math.min(r[0], t.data_offsets[0]), Math.max(r[1], t.data_offsets[1])] : [...t.data_offsets]);
  }
  return [...ranges.entries()].sort((a, b) => a[0] - b[0]).map((e) => e[1]);
}

/** Reads `n` bytes at `at`, or fewer at the end of the file. */
function readAt(fd: number, at: number, n: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  let got = 0;
  while (got < n) {
    const k = readSync(fd, b, got, n - got, at + got);
    if (k === 0) break;
    got += k;
  }
  return b.subarray(0, got);
}

/**
 * The checksum of a token-batch file as the writer defines it (SHA-256 of the header's and each
 * block's SHA-256), read in chunks; throws a StepFileError for a file that is not whole.
 */
export function tokenBatchDigest(path: string): { sha256: string; bytes: number } {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (e) {
    throw new StepFileError(`${path}: cannot read (${(e as Error).message})`);
  }
  try {
    const size = fstatSync(fd).size;
    if (size < 8) throw new StepFileError(`${path}: ${size} bytes, no header (torn or replaced file)`);
    const n = Number(readAt(fd, 0, 8).readBigUInt64LE(0));
    if (8 + n > size) throw new StepFileError(`${path}: header of ${n} bytes in a file of ${size} (torn or replaced file)`);
    const head = readAt(fd, 0, 8 + n);
    let header: Header;
    try {
      header = JSON.parse(head.subarray(8).toString('utf8')) as Header;
    } catch {
      throw new StepFileError(`${path}: unreadable header (torn or replaced file)`);
    }
    const digests = [createHash('sha256').update(head).digest()];
    let end = 0;
    for (const [from, to] of blockRanges(header)) {
      const h = createHash('sha256');
      for (let at = from; at < to; at += CHUNK_BYTES) h.update(readAt(fd, 8 + n + at, Math.min(CHUNK_BYTES, to - at)));
      digests.push(h.digest());
      end = Math.max(end, to);
    }
    if (8 + n + end !== size)
      throw new StepFileError(`${path}: ${size} bytes, its header describes ${8 + n + end} (torn or replaced file)`);
    return { sha256: digestOf(digests), bytes: size };
  } finally {
    closeSync(fd);
  }
}

export class StepFileError extends Error {
  override name = 'StepFileError';
}

/** Throws unless the file is the one the reference names (same size and checksum). */
export function verifyFile(ref: FileRef): void {
  const got = tokenBatchDigest(ref.path);
  if (got.bytes !== ref.bytes || got.sha256 !== ref.sha256) {
    throw new StepFileError(
      `${ref.path}: ${got.bytes} bytes with sha256 ${got.sha256}; the reference says ${ref.bytes} bytes with sha256 ${ref.sha256} (torn or replaced file)`,
    );
  }
}

/** A column of `len` values written from typed arrays of `Ctor`, converted one row at a time. */
function rowColumn(
  name: string,
  dtype: Dtype,
  len: number,
  rows: TokenRowSource,
  pick: (r: TokenRow) => ArrayLike<number>,
  Ctor: Int32ArrayConstructor | Uint8ArrayConstructor | Float32ArrayConstructor,
): { name: string; dtype: Dtype; shape: number[]; fill(put: (c: ArrayBufferView) => void): void } {
  return {
    name,
    dtype,
    shape: [len],
    fill(put) {
      for (let i = 0; i < rows.count; i++) {
        const a = pick(rows.row(i));
        put(a instanceof Ctor ? a : new Ctor(a));
      }
    },
  };
}

/** Writes B rows as a one-block token-batch file and returns its reference. */
export function writeTokenBatch(
  path: string,
  rows: TokenRowSource,
  opts: { where?: string; metadata?: Record<string, string> } = {},
): TokenBatchRef {
  return writing(path, () => {
    const w = new TokenBatchWriter(path, { metadata: opts.metadata });
    try {
      w.append(rows, opts.where);
    } catch (e) {
      w.abort();
      throw e;
    }
    return w.finish();
  });
}

/** Typed columns of a token batch read whole (small files: one trajectory), blocks concatenated. */
export interface TokenBatchColumns {
  offsets: number[];
  ids: Int32Array;
  mask: Uint8Array;
  logprobs?: Float32Array;
  advantages?: Float64Array;
  metadata: Record<string, string>;
}

/** Reads a small token-batch file whole, after checking it against its reference. */
export function readTokenBatch(ref: FileRef): TokenBatchColumns {
  verifyFile(ref);
  const fd = openSync(ref.path, 'r');
  let all: Buffer;
  try {
    all = readAt(fd, 0, ref.bytes);
  } finally {
    closeSync(fd);
  }
  const n = Number(all.readBigUInt64LE(0));
  const header = JSON.parse(all.subarray(8, 8 + n).toString('utf8')) as Header & { __metadata__: Record<string, string> };
  const metadata = header.__metadata__ ?? {};
  if (metadata.format !== TOKEN_BATCH_FORMAT)
    throw new StepFileError(`${ref.path}: format ${metadata.format ?? '(none)'}, expected ${TOKEN_BATCH_FORMAT}`);
  const blocks = blockRanges(header).length;
  const part = (k: number, col: string) => {
    const t = header[`b${k}.${col}`];
    return t ? all.subarray(8 + n + t.data_offsets[0], 8 + n + t.data_offsets[1]) : undefined;
  };
  // Copies into fresh, aligned buffers: a view straight into the file's bytes may be misaligned.
  const concat = <T>(Ctor: { new (b: ArrayBuffer): T; BYTES_PER_ELEMENT: number }, col: string): T | undefined => {
    const parts = Array.from({ length: blocks }, (_, k) => part(k, col));
    if (parts.some((p) => !p)) return undefined;
    const bytes = new Uint8Array(parts.reduce((a, p) => a + p!.length, 0));
    let at = 0;
    for (const p of parts) bytes.set(p!, at), (at += p!.length);
    return new Ctor(bytes.buffer);
  };
  const offsets: number[] = [0];
  for (let k = 0; k < blocks; k++) {
    const local = new BigInt64Array(Uint8Array.from(part(k, 'offsets')!).buffer);
    const base = offsets[offsets.length - 1];
    for (let i = 1; i < local.length; i++) offsets.push(base + Number(local[i]));
  }
  return {
    offsets,
    ids: concat(Int32Array, 'ids')!,
    mask: concat(Uint8Array, 'mask')!,
    ...(part(0, 'logprobs') && { logprobs: concat(Float32Array, 'logprobs') }),
    ...(part(0, 'advantages') && { advantages: concat(Float64Array, 'advantages') }),
    metadata,
  };
}
