/**
 * Batch generation over an ONNX causal LM: prompts are left-padded so every row's next
 * token is read at the last position; with a KV cache the prompt runs once and each later
 * step feeds one token per row, without one the whole sequence runs every step. A row that
 * finishes leaves the batch (and its cache rows), so short answers stop costing compute.
 */
import * as ort from 'onnxruntime-node';
import type { OnnxCausalLM } from './model';
import { Rng } from '../rng';
import { TokenSampler } from '../sampling';
import { GenerationInputError, type Generation, type Sampling } from '../types';

export interface BatchRow {
  promptIds: number[];
  sampling: Sampling;
  seed: number;
  /** Once aborted, the row leaves the batch at the next step with finish 'abort'. */
  signal?: AbortSignal;
  /** Called with each sampled token, before the next step runs. */
  onToken?: (tokenId: number, logprob: number) => void;
}

export interface DecodeOptions {
  eosIds: ReadonlySet<number>;
  padId: number;
  /** Token ids -> text. */
  decode(ids: number[]): string;
  /** Use the export's KV cache when it has one; false recomputes the whole sequence each step. */
  useCache: boolean;
}

interface Row extends BatchRow {
  rng: Rng;
  budget: number;
  out: number[];
  logprobs: number[];
  top: Map<number, number>[];
  done: boolean;
  finish: Generation['finishReason'];
  text?: string;
}

export async function generateBatch(model: OnnxCausalLM, batch: BatchRow[], opts: DecodeOptions): Promise<Generation[]> {
  const rows: Row[] = batch.map((b, i) => {
    if (b.promptIds.length === 0) throw new GenerationInputError(`requests[${i}].promptIds: the prompt is empty`);
    const bad = b.promptIds.find((id) => !Number.isInteger(id) || id < 0 || id >= model.vocabSize);
    if (bad !== undefined) throw new GenerationInputError(`requests[${i}].promptIds: token id ${bad} is outside the vocabulary [0, ${model.vocabSize})`);
    const room = model.maxPositions - b.promptIds.length;
    if (room <= 0) throw new GenerationInputError(`requests[${i}].promptIds: a prompt of ${b.promptIds.length} tokens fills the model's ${model.maxPositions} positions`);
    return { ...b, rng: new Rng(b.seed), budget: Math.min(b.sampling.maxTokens, room), out: [], logprobs: [], top: [], done: false, finish: 'length' };
  });
  const width = Math.max(...rows.map((r) => r.promptIds.length));
  const useCache = opts.useCache && model.cache.length > 0;
  const sampler = new TokenSampler();
  // Rows still generating, in the order the model sees them; finished rows leave the batch.
  for (const r of rows) abortIfAsked(r);
  let active = rows.filter((r) => !r.done);
  let past = emptyPast(model, active.length);
  for (let step = 0; active.length > 0; step++) {
    const feeds = useCache && step > 0 ? lastTokenFeeds(active, width, step, model) : fullFeeds(active, width, step, model, opts.padId);
    const result = await model.session.run({ ...feeds, ...past }, useCache ? model.session.outputNames : ['logits']);
    const logits = result.logits;
    if (logits.type !== 'float32') throw new Error(`${model.onnxPath}: logits are ${logits.type}, expected float32`);
    const [, t, v] = logits.dims;
    const data = logits.data as Float32Array;
    active.forEach((r, b) => {
      const at = (b * t + t - 1) * v;
      const pick = sampler.pick(data.subarray(at, at + v), r.sampling, r.rng);
      r.out.push(pick.token);
      r.logprobs.push(pick.logprob);
      if (pick.top) r.top.push(pick.top);
      r.onToken?.(pick.token, pick.logprob);
      finishIfDone(r, opts);
      abortIfAsked(r);
    });
    const keep = active.flatMap((r, b) => (r.done ? [] : [b]));
    if (useCache) past = Object.fromEntries(model.cache.map((c) => [c.input, keepRows(result[c.output] as ort.Tensor, keep, active.length)]));
    active = keep.map((b) => active[b]);
  }
  return rows.map((r) => ({
    tokenIds: r.out,
    logprobs: r.logprobs,
    ...(r.sampling.topLogprobs > 0 ? { topLogprobs: r.top } : {}),
    text: r.text ?? opts.decode(r.out.filter((id) => !opts.eosIds.has(id))),
    finishReason: r.finish,
    promptTokens: r.promptIds.length,
  }));
}

function abortIfAsked(r: Row): void {
  if (r.done || !r.signal?.aborted) return;
  r.done = true;
  r.finish = 'abort';
}

function finishIfDone(r: Row, opts: DecodeOptions): void {
  const last = r.out[r.out.length - 1];
  if (opts.eosIds.has(last)) {
    r.done = true;
    r.finish = 'stop';
    return;
  }
  if (r.sampling.stop.length) {
    const text = opts.decode(r.out);
    const cut = Math.min(...r.sampling.stop.map((s) => text.indexOf(s)).filter((i) => i >= 0));
    if (Number.isFinite(cut)) {
      r.done = true;
      r.finish = 'stop';
      r.text = text.slice(0, cut);
      return;
    }
  }
  if (r.out.length >= r.budget) r.done = true;
}

function int64(values: number[], dims: number[]): ort.Tensor {
  return new ort.Tensor('int64', BigInt64Array.from(values, (x) => BigInt(x)), dims);
}

/** The whole (left-padded) sequence so far: the first step, or every step without a cache. */
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
  return feeds;
}

/** One new token per row on top of the cache. */
function lastTokenFeeds(rows: Row[], width: number, step: number, model: OnnxCausalLM): Record<string, ort.Tensor> {
  const len = width + step;
  const mask: number[] = [];
  for (const r of rows) {
    const pad = width - r.promptIds.length;
    for (let j = 0; j < len; j++) mask.push(j < pad ? 0 : 1);
  }
  const feeds: Record<string, ort.Tensor> = {
    input_ids: int64(rows.map((r) => r.out[step - 1]), [rows.length, 1]),
    attention_mask: int64(mask, [rows.length, len]),
  };
  if (model.hasPositionIds) feeds.position_ids = int64(rows.map((r) => r.promptIds.length + step - 1), [rows.length, 1]);
  return feeds;
}

/** The cache rows (first dimension) listed in keep, copied only when some rows left. */
function keepRows(t: ort.Tensor, keep: number[], batch: number): ort.Tensor {
  if (keep.length === batch) return t;
  const [, ...rest] = t.dims;
  const per = rest.reduce((a, x) => a * x, 1);
  const src = t.data as Float32Array;
  const dst = new Float32Array(keep.length * per);
  keep.forEach((b, j) => dst.set(src.subarray(b * per, (b + 1) * per), j * per));
  return new ort.Tensor('float32', dst, [keep.length, ...rest]);
}

function emptyPast(model: OnnxCausalLM, batch: number): Record<string, ort.Tensor> {
  const dims = [batch, model.kvHeads, 0, model.headDim];
  return Object.fromEntries(model.cache.map((c) => [c.input, new ort.Tensor('float32', new Float32Array(0), dims)]));
}
