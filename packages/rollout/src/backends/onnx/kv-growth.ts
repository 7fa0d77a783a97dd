import * as ort from 'onnxruntime-node';

/**
 * The key/values of one prompt prefilled chunk by chunk, grown in place. Each cache slot gets one
 * buffer for the whole prompt; a chunk's key/values are appended by moving each head's positions
 * so far up within it, instead of copying the prefix into a new array per chunk (a prompt of n
 * chunks copied its prefix about n/2 times: 13-17 ms of a 1,205-token prefill in 19 chunks,
 * scripts/bench/onnx-decode-steps.ts). The same values end up in the same places, so what runs on
 * them is unchanged.
 */
export class KvGrowth {
  private readonly buffers = new Map<number, Float32Array>();

  /** room: the prompt's length, the most positions any slot will hold. */
  constructor(private readonly room: number) {}

  /**
   * `a` then `b`, two [1, heads, positions, headDim] tensors, along positions: a view of slot
   * `slot`'s buffer. `a` is moved in place when it is this growth's last view of that slot (the
   * view stops being valid); any other tensor (a cached prompt's) is copied, never written.
   */
  append(slot: number, a: ort.Tensor, b: ort.Tensor): ort.Tensor {
    const [, heads, la, dim] = a.dims;
    const lb = b.dims[2];
    const len = la + lb;
    if (len > this.room) throw new Error(`KvGrowth: ${len} positions, room for ${this.room}`);
    const [x, y] = [a.data as Float32Array, b.data as Float32Array];
    let buf = this.buffers.get(slot);
    if (buf && x.buffer === buf.buffer) {
      // From the last head down, so that no head's positions are overwritten before they move.
      for (let h = heads - 1; h > 0; h--) buf.copyWithin(h * len * dim, h * la * dim, (h + 1) * la * dim);
    } else {
      buf = new Float32Array(heads * this.room * dim);
      this.buffers.set(slot, buf);
      for (let h = 0; h < heads; h++) buf.set(x.subarray(h * la * dim, (h + 1) * la * dim), h * len * dim);
    }
    for (let h = 0; h < heads; h++) buf.set(y.subarray(h * lb * dim, (h + 1) * lb * dim), (h * len + la) * dim);
    return new ort.Tensor('float32', buf.subarray(0, heads * len * dim), [1, heads, len, dim]);
  }
}
