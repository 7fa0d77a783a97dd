/**
 * The KV cache of the model's own graph (past in, present out): running rows are left-padded
 * to the longest one. Row b holds its `len` cached tokens in the last `len` of `width`
 * positions, the padding is zero and masked, and positions are passed per row, so a row's
 * tokens do not depend on its batch mates beyond float rounding.
 *
 * onnxruntime-node 1.30 copies every CPU output into a new JavaScript buffer (there is no IO
 * binding that keeps an output inside onnxruntime on CPU), so the present key/values come back
 * once per step, each row's whole cache; they are fed as the next step's past without another
 * copy, and copied only when rows join or leave. Exports with decode.onnx use prefix-cache.ts.
 */
import * as ort from 'onnxruntime-node';
import type { BatchCache, CachedPrefix, Member, Prefill } from './batch-cache';
import { int64 } from './generate';
import { logitsOf, type OnnxCausalLM } from './model';
import { leadingPositions } from './prompt-cache';

export class PaddedCache implements BatchCache {
  members: Member[] = [];
  /** Per cache slot (model.cache order), [rows, heads, width, headDim]. */
  private past: ort.Tensor[] = [];
  private width = 0;

  constructor(private readonly model: OnnxCausalLM) {}

  async prefill(prompt: number[], from?: CachedPrefix): Promise<{ logits: Float32Array; prefill: Prefill }> {
    const m = this.model;
    const p = from?.len ?? 0;
    const fresh = prompt.slice(p);
    const feeds: Record<string, ort.Tensor> = {
      input_ids: int64(fresh, [1, fresh.length]),
      attention_mask: int64(
        prompt.map(() => 1),
        [1, prompt.length],
      ),
    };
    if (m.hasPositionIds)
      feeds.position_ids = int64(
        fresh.map((_, i) => p + i),
        [1, fresh.length],
      );
    m.cache.forEach(
      (c, i) =>
        (feeds[c.input] = from
          ? leadingPositions(from.prefill.kv[i], p)
          : new ort.Tensor('float32', new Float32Array(0), [1, m.kvHeads, 0, m.headDim])),
    );
    const result = await m.session.run(feeds, m.session.outputNames);
    const logits = logitsOf(result, m.onnxPath);
    const v = logits.dims[2];
    const kv = m.cache.map((c) => result[c.output]);
    const odd = kv.find((x) => x.type !== 'float32');
    if (odd) throw new Error(`${m.onnxPath}: the key/value cache is ${odd.type}, expected float32`);
    const last = fresh.length - 1;
    return { logits: (logits.data as Float32Array).subarray(last * v, (last + 1) * v), prefill: { len: prompt.length, kv } };
  }

  /** The running batch plus the entrants, all right-aligned in the wider of the two widths. */
  join(entrants: Member[]): void {
    const width = Math.max(this.width, ...entrants.map((e) => e.len));
    const rows = this.members.length + entrants.length;
    this.past = this.model.cache.map((_, c) => {
      const like = this.past[c] ?? entrants[0].prefill.kv[c];
      const [, heads, , dim] = like.dims;
      const dst = new Float32Array(rows * heads * width * dim);
      this.members.forEach((_, b) => copyRow(this.past[c], b, this.width, dst, b, width, this.width));
      entrants.forEach((e, j) => copyRow(e.prefill.kv[c], 0, e.len, dst, this.members.length + j, width, e.len));
      return new ort.Tensor('float32', dst, [rows, heads, width, dim]);
    });
    this.members = [...this.members, ...entrants];
    this.width = width;
  }

  async step(): Promise<Float32Array[]> {
    const m = this.model;
    const rows = this.members;
    const b = rows.length;
    const w = this.width;
    // Each row attends to its own `len` cached positions and the new one; the padding before them is masked.
    const mask = new BigInt64Array(b * (w + 1));
    rows.forEach((r, i) => mask.fill(1n, i * (w + 1) + w - r.len, (i + 1) * (w + 1)));
    const feeds: Record<string, ort.Tensor> = {
      input_ids: int64(
        rows.map((r) => r.row.out[r.row.out.length - 1]),
        [b, 1],
      ),
      attention_mask: new ort.Tensor('int64', mask, [b, w + 1]),
    };
    if (m.hasPositionIds)
      feeds.position_ids = int64(
        rows.map((r) => r.len),
        [b, 1],
      );
    m.cache.forEach((c, i) => (feeds[c.input] = this.past[i]));
    const result = await m.session.run(feeds, m.session.outputNames);
    const logits = logitsOf(result, m.onnxPath);
    const [, t, v] = logits.dims;
    const data = logits.data as Float32Array;
    this.past = m.cache.map((c) => result[c.output]);
    this.width = w + 1;
    return rows.map((r, i) => {
      r.len++;
      const at = (i * t + t - 1) * v;
      return data.subarray(at, at + v);
    });
  }

  /** Keeps only `keep`'s rows of the cache, cut to the longest of them. */
  leave(keep: Member[]): void {
    if (keep.length === 0) {
      this.clear();
      return;
    }
    const width = Math.max(...keep.map((r) => r.len));
    const index = new Map(this.members.map((r, b) => [r, b]));
    this.past = this.past.map((t) => {
      const [, heads, , dim] = t.dims;
      const dst = new Float32Array(keep.length * heads * width * dim);
      keep.forEach((r, j) => copyRow(t, index.get(r)!, this.width, dst, j, width, width));
      return new ort.Tensor('float32', dst, [keep.length, heads, width, dim]);
    });
    this.members = keep;
    this.width = width;
  }

  clear(): void {
    this.members = [];
    this.past = [];
    this.width = 0;
  }
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
