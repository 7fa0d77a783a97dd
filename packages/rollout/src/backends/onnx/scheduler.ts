/**
 * Continuous batching on the KV cache. Every generate() call of one loaded model hands its rows
 * to the same scheduler, which decodes all running rows as one batch, one token per row per
 * step: a row joins once its prompt is prefilled and leaves when it ends, so the episodes a
 * rollout worker plays at the same time share each forward pass.
 *
 * A prompt is prefilled alone (rows with the same prompt, as a GRPO group's samples, share that
 * prefill), so a row's first token is exactly what it gets alone. Running rows are left-padded
 * to the longest one: row b holds its `len` cached tokens in the last `len` of `width`
 * positions, the padding is zero and masked, and positions are passed per row, so a row's
 * tokens do not depend on its batch mates beyond float rounding.
 *
 * onnxruntime-node 1.30 copies every CPU output into a new JavaScript buffer (there is no IO
 * binding that keeps an output inside onnxruntime on CPU), so the present key/values come back
 * once per step; they are fed as the next step's past without another copy, and copied only
 * when rows join or leave.
 */
import * as ort from 'onnxruntime-node';
import type { OnnxCausalLM } from './model';
import { int64 } from './generate';
import { abortIfAsked, emitToken, type DecodeOptions, type Row } from './rows';
import { TokenSampler } from '../sampling';

/** One generate() call: resolved when its last row is done. */
interface Ticket {
  left: number;
  /** Its onToken threw: the call has failed, and its rows leave without the batch failing. */
  failed?: boolean;
  resolve(): void;
  reject(e: unknown): void;
}

interface Entry {
  row: Row;
  ticket: Ticket;
}

interface Member extends Entry {
  /** Tokens of this row in the cache: the last `len` of the batch's `width` positions. */
  len: number;
}

export class DecodeScheduler {
  private pending: Entry[] = [];
  /** Taken from pending and being prefilled. */
  private joining: Entry[] = [];
  private members: Member[] = [];
  /** Per cache slot (model.cache order), [rows, heads, width, headDim]. */
  private past: ort.Tensor[] = [];
  private width = 0;
  private driving = false;
  private readonly sampler = new TokenSampler();

  constructor(
    private readonly model: OnnxCausalLM,
    private readonly opts: DecodeOptions,
    /** Most rows decoded together; later rows wait for a place. */
    private readonly maxBatch: number,
  ) {}

  /** Decodes the rows (filling them in) beside whatever else runs; resolves once all are done. */
  run(rows: Row[]): Promise<void> {
    return new Promise((resolve, reject) => {
      if (rows.length === 0) return resolve();
      const ticket: Ticket = { left: rows.length, resolve, reject };
      for (const row of rows) this.pending.push({ row, ticket });
      if (!this.driving) {
        this.driving = true;
        // Calls made in the same turn of the event loop join the first step together.
        setImmediate(() => void this.drive());
      }
    });
  }

  private async drive(): Promise<void> {
    try {
      while (this.members.length > 0 || this.pending.length > 0) {
        await this.admit();
        if (this.members.length > 0) await this.step();
      }
    } catch (e) {
      this.fail(e);
    } finally {
      // No await between the loop's last check and this: a run() after it starts a new loop.
      this.driving = false;
    }
  }

  /** Prefills waiting rows while there is room and merges them into the running batch. */
  private async admit(): Promise<void> {
    for (const e of this.pending) {
      abortIfAsked(e.row);
      if (e.ticket.failed) e.row.done = true;
      if (e.row.done) settle(e);
    }
    this.pending = this.pending.filter((e) => !e.row.done);
    const room = this.maxBatch - this.members.length;
    if (room <= 0 || this.pending.length === 0) return;
    this.joining = this.pending.splice(0, room);
    const byPrompt = new Map<string, Entry[]>();
    for (const e of this.joining) {
      const key = e.row.promptIds.join(',');
      byPrompt.set(key, [...(byPrompt.get(key) ?? []), e]);
    }
    const entrants: { member: Member; kv: ort.Tensor[] }[] = [];
    for (const group of byPrompt.values()) {
      const prompt = group[0].row.promptIds;
      const { logits, kv } = await this.prefill(prompt);
      for (const e of group) {
        emit(e, logits, this.sampler, this.opts);
        if (e.row.done) settle(e);
        else entrants.push({ member: { ...e, len: prompt.length }, kv });
      }
    }
    if (entrants.length > 0) this.join(entrants);
    this.joining = [];
  }

  /** Runs one prompt from an empty cache: its last position's logits and its key/values. */
  private async prefill(prompt: number[]): Promise<{ logits: Float32Array; kv: ort.Tensor[] }> {
    const m = this.model;
    const t = prompt.length;
    const feeds: Record<string, ort.Tensor> = {
      input_ids: int64(prompt, [1, t]),
      attention_mask: int64(prompt.map(() => 1), [1, t]),
    };
    if (m.hasPositionIds) feeds.position_ids = int64(prompt.map((_, i) => i), [1, t]);
    for (const c of m.cache) feeds[c.input] = new ort.Tensor('float32', new Float32Array(0), [1, m.kvHeads, 0, m.headDim]);
    const result = await m.session.run(feeds, m.session.outputNames);
    const logits = logitsOf(result, m);
    const v = logits.dims[2];
    const kv = m.cache.map((c) => result[c.output]);
    const odd = kv.find((x) => x.type !== 'float32');
    if (odd) throw new Error(`${m.onnxPath}: the key/value cache is ${odd.type}, expected float32`);
    return { logits: (logits.data as Float32Array).subarray((t - 1) * v, t * v), kv };
  }

  /** The running batch plus the entrants, all right-aligned in the wider of the two widths. */
  private join(entrants: { member: Member; kv: ort.Tensor[] }[]): void {
    const width = Math.max(this.width, ...entrants.map((e) => e.member.len));
    const rows = this.members.length + entrants.length;
    this.past = this.model.cache.map((_, c) => {
      const like = this.past[c] ?? entrants[0].kv[c];
      const [, heads, , dim] = like.dims;
      const dst = new Float32Array(rows * heads * width * dim);
      this.members.forEach((_, b) => copyRow(this.past[c], b, this.width, dst, b, width, this.width));
      entrants.forEach((e, j) => copyRow(e.kv[c], 0, e.member.len, dst, this.members.length + j, width, e.member.len));
      return new ort.Tensor('float32', dst, [rows, heads, width, dim]);
    });
    this.members.push(...entrants.map((e) => e.member));
    this.width = width;
  }

  /** One token for every running row on top of the cache; finished rows leave. */
  private async step(): Promise<void> {
    const m = this.model;
    const rows = this.members;
    const b = rows.length;
    const w = this.width;
    // Each row attends to its own `len` cached positions and the new one; the padding before them is masked.
    const mask = new BigInt64Array(b * (w + 1));
    rows.forEach((r, i) => mask.fill(1n, i * (w + 1) + w - r.len, (i + 1) * (w + 1)));
    const feeds: Record<string, ort.Tensor> = {
      input_ids: int64(rows.map((r) => r.row.out[r.row.out.length - 1]), [b, 1]),
      attention_mask: new ort.Tensor('int64', mask, [b, w + 1]),
    };
    if (m.hasPositionIds) feeds.position_ids = int64(rows.map((r) => r.len), [b, 1]);
    m.cache.forEach((c, i) => (feeds[c.input] = this.past[i]));
    const result = await m.session.run(feeds, m.session.outputNames);
    const logits = logitsOf(result, m);
    const [, t, v] = logits.dims;
    const data = logits.data as Float32Array;
    rows.forEach((r, i) => {
      r.len++;
      const at = (i * t + t - 1) * v;
      emit(r, data.subarray(at, at + v), this.sampler, this.opts);
    });
    this.past = m.cache.map((c) => result[c.output]);
    this.width = w + 1;
    const keep = rows.filter((r) => !r.row.done);
    for (const r of rows) if (r.row.done) settle(r);
    if (keep.length < rows.length) this.leave(keep);
  }

  /** Keeps only `keep`'s rows of the cache, cut to the longest of them. */
  private leave(keep: Member[]): void {
    const width = Math.max(0, ...keep.map((r) => r.len));
    const index = new Map(this.members.map((r, b) => [r, b]));
    this.past = keep.length === 0 ? [] : this.past.map((t) => {
      const [, heads, , dim] = t.dims;
      const dst = new Float32Array(keep.length * heads * width * dim);
      keep.forEach((r, j) => copyRow(t, index.get(r)!, this.width, dst, j, width, width));
      return new ort.Tensor('float32', dst, [keep.length, heads, width, dim]);
    });
    this.members = keep;
    this.width = width;
  }

  /** A failed run fails every call waiting on this scheduler; the next call starts afresh. */
  private fail(e: unknown): void {
    for (const entry of [...this.members, ...this.joining, ...this.pending]) entry.ticket.reject(e);
    this.members = [];
    this.joining = [];
    this.pending = [];
    this.past = [];
    this.width = 0;
  }
}

function settle(e: Entry): void {
  if (--e.ticket.left === 0) e.ticket.resolve();
}

/** emitToken for one row; a throwing onToken fails that row's call only. */
function emit(e: Entry, logits: Float32Array, sampler: TokenSampler, opts: DecodeOptions): void {
  if (e.ticket.failed) {
    e.row.done = true;
    return;
  }
  try {
    emitToken(e.row, logits, sampler, opts);
  } catch (err) {
    e.row.done = true;
    e.ticket.failed = true;
    e.ticket.reject(err);
  }
}

function logitsOf(result: ort.InferenceSession.ReturnType, m: OnnxCausalLM): ort.Tensor {
  const logits = result.logits;
  if (logits.type !== 'float32') throw new Error(`${m.onnxPath}: logits are ${logits.type}, expected float32`);
  return logits;
}

/**
 * Copies the last `n` positions of row `sb` of `src` (width `sw`) to the last `n` positions of
 * row `db` of `dst` (width `dw`), head by head; the positions before them stay as they are (zero).
 */
function copyRow(src: ort.Tensor, sb: number, sw: number, dst: Float32Array, db: number, dw: number, n: number): void {
  const [, heads, , dim] = src.dims;
  const s = src.data as Float32Array;
  for (let h = 0; h < heads; h++) {
    const from = ((sb * heads + h) * sw + sw - n) * dim;
    dst.set(s.subarray(from, from + n * dim), ((db * heads + h) * dw + dw - n) * dim);
  }
}
