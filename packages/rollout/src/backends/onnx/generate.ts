/**
 * Generation without a KV cache (kvCache 'off', or an export without one): prompts are
 * left-padded so every row's next token is read at the last position, and the whole sequence
 * runs every step. A row that finishes leaves the batch. With a cache, scheduler.ts decodes.
 */
import * as ort from 'onnxruntime-node';
import { logitsOf, type OnnxCausalLM } from './model';
import { abortIfAsked, emitToken, type DecodeOptions, type Row } from './rows';
import { TokenSampler } from '../sampling';

export async function generateUncached(model: OnnxCausalLM, rows: Row[], opts: DecodeOptions): Promise<void> {
  const width = Math.max(...rows.map((r) => r.promptIds.length));
  const sampler = new TokenSampler();
  for (const r of rows) abortIfAsked(r);
  let active = rows.filter((r) => !r.done);
  for (let step = 0; active.length > 0; step++) {
    const result = await model.session.run(fullFeeds(active, width, step, model, opts.padId), ['logits']);
    const logits = logitsOf(result, model.onnxPath);
    const [, t, v] = logits.dims;
    const data = logits.data as Float32Array;
    active.forEach((r, b) => {
      const at = (b * t + t - 1) * v;
      emitToken(r, data.subarray(at, at + v), sampler, opts);
    });
    active = active.filter((r) => !r.done);
  }
}

export function int64(values: number[], dims: number[]): ort.Tensor {
  return new ort.Tensor(
    'int64',
    BigInt64Array.from(values, (x) => BigInt(x)),
    dims,
  );
}

/** The whole (left-padded) sequence so far. */
function fullFeeds(rows: Row[], width: number, step: number, model: OnnxCausalLM, padId: number): Record<string, ort.Tensor> {
  const len = width + step;
  const ids: number[] = [];
  const mask: number[] = [];
  const pos: number[] = [];
  for (const r of rows) {
    const pad = width - r.promptIds.length;
    const seq = r.promptIds.concat(r.out);
    for (let j = 0; j < len; j++) {
      ids.push(j < pad ? padId : seq[j - pad]);
      mask.push(j < pad ? 0 : 1);
      pos.push(j < pad ? 0 : j - pad);
    }
  }
  const feeds: Record<string, ort.Tensor> = { input_ids: int64(ids, [rows.length, len]), attention_mask: int64(mask, [rows.length, len]) };
  if (model.hasPositionIds) feeds.position_ids = int64(pos, [rows.length, len]);
  // An export with a cache still wants its (empty) past inputs.
  for (const c of model.cache)
    feeds[c.input] = new ort.Tensor('float32', new Float32Array(0), [rows.length, model.kvHeads, 0, model.headDim]);
  return feeds;
}
