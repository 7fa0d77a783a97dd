/**
 * Reads a .safetensors file as the format defines it (an 8-byte little-endian header length, a
 * JSON header of dtype, shape and data offsets, then the raw tensor bytes), independently of the
 * Python side that wrote it.
 */
import { readFileSync } from 'node:fs';

export interface Tensor {
  dtype: string;
  shape: number[];
  data: Buffer;
}

export function readSafetensors(file: string): Map<string, Tensor> {
  const buf = readFileSync(file);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString('utf8')) as Record<
    string,
    { dtype: string; shape: number[]; data_offsets: [number, number] }
  >;
  const out = new Map<string, Tensor>();
  for (const [name, t] of Object.entries(header)) {
    if (name !== '__metadata__')
      out.set(name, { dtype: t.dtype, shape: t.shape, data: buf.subarray(8 + n + t.data_offsets[0], 8 + n + t.data_offsets[1]) });
  }
  return out;
}

/** The values of an F32 or BF16 tensor as float64 (bfloat16 is the top half of a float32). */
export function tensorValues(t: Tensor): Float64Array {
  if (t.dtype === 'F32') return Float64Array.from({ length: t.data.length / 4 }, (_, i) => t.data.readFloatLE(4 * i));
  if (t.dtype === 'BF16') {
    const f = Buffer.alloc(4);
    return Float64Array.from({ length: t.data.length / 2 }, (_, i) => {
      f.writeUInt32LE((t.data.readUInt16LE(2 * i) << 16) >>> 0, 0);
      return f.readFloatLE(0);
    });
  }
  throw new Error(`tensor dtype ${t.dtype}: only F32 and BF16 are read here`);
}
