import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { KvGrowth } from '../src/backends/onnx/kv-growth';

const HEADS = 3;
const DIM = 2;
/** A [1, heads, positions, dim] tensor whose value at (h, p, d) is value(h, first + p, d). */
function kv(first: number, positions: number, value: (h: number, p: number, d: number) => number): ort.Tensor {
  const data = new Float32Array(HEADS * positions * DIM);
  for (let h = 0; h < HEADS; h++)
    for (let p = 0; p < positions; p++) for (let d = 0; d < DIM; d++) data[(h * positions + p) * DIM + d] = value(h, first + p, d);
  return new ort.Tensor('float32', data, [1, HEADS, positions, DIM]);
}
const v = (h: number, p: number, d: number) => 1000 * h + 10 * p + d;

describe('KvGrowth: a chunked prefill key/values grown in place', () => {
  it('appends chunk after chunk as one [1, heads, positions, dim] tensor, head by head, position by position', () => {
    const growth = new KvGrowth(11);
    let sofar = kv(0, 4, v);
    for (const [first, n] of [
      [4, 4],
      [8, 2],
      [10, 1],
    ]) {
      sofar = growth.append(0, sofar, kv(first, n, v));
      expect(sofar.dims).toEqual([1, HEADS, first + n, DIM]);
      expect(Array.from(sofar.data as Float32Array)).toEqual(Array.from(kv(0, first + n, v).data as Float32Array));
    }
  });

  it("never writes a tensor it did not make (a cached prompt's), and keeps slots apart", () => {
    const growth = new KvGrowth(8);
    const cached = kv(0, 4, v);
    const before = Array.from(cached.data as Float32Array);
    const a = growth.append(0, cached, kv(4, 2, v));
    const b = growth.append(
      1,
      cached,
      kv(4, 2, (h, p, d) => -v(h, p, d)),
    );
    growth.append(0, a, kv(6, 2, v));
    expect(Array.from(cached.data as Float32Array)).toEqual(before);
    expect((b.data as Float32Array)[(0 * 6 + 5) * DIM]).toBe(-v(0, 5, 0));
    expect(() => growth.append(0, kv(0, 8, v), kv(8, 1, v))).toThrow(/9 positions, room for 8/);
  });
});
