/**
 * One request's state while it decodes, shared by both decoding strategies (continuous
 * batching on the KV cache, full recomputation without one): validation, the token it picks
 * from its row of logits, when it ends, and the Generation it becomes.
 */
import { Rng } from '@thinkfl/env';
import type { TokenSampler } from '../sampling';
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
}

/** What a row needs to know about the model to validate its prompt. */
export interface RowLimits {
  vocabSize: number;
  maxPositions: number;
}

export interface Row extends BatchRow {
  rng: Rng;
  budget: number;
  out: number[];
  logprobs: number[];
  top: Map<number, number>[];
  done: boolean;
  finish: Generation['finishReason'];
  text?: string;
}

/** Checks request i against the model and starts its state; throws GenerationInputError naming the field. */
export function startRow(b: BatchRow, i: number, model: RowLimits): Row {
  if (b.promptIds.length === 0) throw new GenerationInputError(`requests[${i}].promptIds: the prompt is empty`);
  const bad = b.promptIds.find((id) => !Number.isInteger(id) || id < 0 || id >= model.vocabSize);
  if (bad !== undefined)
    throw new GenerationInputError(`requests[${i}].promptIds: token id ${bad} is outside the vocabulary [0, ${model.vocabSize})`);
  const room = model.maxPositions - b.promptIds.length;
  if (room <= 0)
    throw new GenerationInputError(
      `requests[${i}].promptIds: a prompt of ${b.promptIds.length} tokens fills the model's ${model.maxPositions} positions`,
    );
  return {
    ...b,
    rng: new Rng(b.seed),
    budget: Math.min(b.sampling.max_tokens, room),
    out: [],
    logprobs: [],
    top: [],
    done: false,
    finish: 'length',
  };
}

/** Samples the row's next token from its logits, reports it, and marks the row done when it ends. */
export function emitToken(r: Row, logits: Float32Array, sampler: TokenSampler, opts: DecodeOptions): void {
  const pick = sampler.pick(logits, r.sampling, r.rng);
  r.out.push(pick.token);
  r.logprobs.push(pick.logprob);
  if (pick.top) r.top.push(pick.top);
  r.onToken?.(pick.token, pick.logprob);
  finishIfDone(r, opts);
  abortIfAsked(r);
}

export function abortIfAsked(r: Row): void {
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

export function toGeneration(r: Row, opts: DecodeOptions): Generation {
  return {
    tokenIds: r.out,
    logprobs: r.logprobs,
    ...(r.sampling.top_logprobs > 0 ? { topLogprobs: r.top } : {}),
    text: r.text ?? opts.decode(r.out.filter((id) => !opts.eosIds.has(id))),
    finishReason: r.finish,
    promptTokens: r.promptIds.length,
  };
}
