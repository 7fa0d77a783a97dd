/**
 * Picks the next token from one row of logits: greedy at temperature 0, otherwise
 * temperature + nucleus (top-p) sampling with a seeded Rng. Log-probabilities are
 * log-softmax(logits / T) over the whole vocabulary, the definition the train engine recomputes
 * at the trajectory's temperature, so on-policy importance ratios are 1. That is the
 * distribution that sampled only with top_p 1: a nucleus renormalizes the sampling distribution
 * (and vLLM's processed_logprobs) over fewer tokens, which is why runs on the vllm backend need
 * top_p 1. Greedy decoding (T = 0) reports the raw distribution (T = 1), as vLLM does.
 */
import type { Sampling } from './types';
import type { Rng } from '@thinkfl/env';

export interface Pick {
  token: number;
  logprob: number;
  top?: Map<number, number>;
}

export class TokenSampler {
  private weights = new Float64Array(0);
  private order = new Uint32Array(0);

  pick(logits: Float32Array, s: Sampling, rng: Rng): Pick {
    const v = logits.length;
    if (this.weights.length < v) {
      this.weights = new Float64Array(v);
      this.order = new Uint32Array(v);
    }
    let max = -Infinity;
    let argmax = 0;
    for (let i = 0; i < v; i++) {
      if (logits[i] > max) {
        max = logits[i];
        argmax = i;
      }
    }
    if (!Number.isFinite(max)) throw new Error('model produced non-finite logits');
    const t = s.temperature === 0 ? 1 : s.temperature;
    // One pass of exp over the vocabulary (about 4 ms on Qwen2.5's 151,936 tokens); when sampling,
    // the weights it leaves in this.weights are what the token is drawn from.
    const w = this.weights;
    let sum = 0;
    if (s.temperature === 0) for (let i = 0; i < v; i++) sum += Math.exp((logits[i] - max) / t);
    else
      for (let i = 0; i < v; i++) {
        w[i] = Math.exp((logits[i] - max) / t);
        sum += w[i];
      }
    // log p_T(i) = (logits[i] - max) / T - log(sum_j exp((logits[j] - max) / T))
    const logZ = Math.log(sum);
    const logprob = (i: number) => (logits[i] - max) / t - logZ;
    const token = s.temperature === 0 ? argmax : this.sample(v, sum, s, rng);
    const pick: Pick = { token, logprob: logprob(token) };
    if (s.top_logprobs > 0) pick.top = topK(logits, s.top_logprobs, logprob);
    return pick;
  }

  /** A token drawn from this.weights (exp((logits - max) / T), summing to `sum`), inside the nucleus. */
  private sample(v: number, sum: number, s: Sampling, rng: Rng): number {
    const w = this.weights;
    if (s.top_p >= 1) return draw(w, v, sum, rng.next());
    const n = this.nucleus(w, v, sum * s.top_p);
    let kept = 0;
    for (let j = 0; j < n; j++) kept += w[this.order[j]];
    let u = rng.next() * kept;
    for (let j = 0; j < n; j++) {
      u -= w[this.order[j]];
      if (u < 0) return this.order[j];
    }
    return this.order[n - 1];
  }

  /**
   * Fills this.order with the nucleus (most likely first) and returns its size. Only tokens
   * above a halving threshold whose mass already reaches the target are sorted, which keeps
   * this O(V) for 150k-token vocabularies instead of a full sort per token.
   */
  private nucleus(w: Float64Array, v: number, target: number): number {
    let wmax = 0;
    for (let i = 0; i < v; i++) if (w[i] > wmax) wmax = w[i];
    let threshold = wmax;
    let n = 0;
    for (;;) {
      n = 0;
      let mass = 0;
      for (let i = 0; i < v; i++) {
        if (w[i] >= threshold) {
          this.order[n++] = i;
          mass += w[i];
        }
      }
      if (mass >= target || threshold === 0) break;
      threshold = threshold < 1e-300 ? 0 : threshold / 16;
    }
    const cand = this.order.subarray(0, n);
    cand.sort((a, b) => w[b] - w[a] || a - b);
    let acc = 0;
    for (let j = 0; j < n; j++) {
      acc += w[cand[j]];
      if (acc >= target) return j + 1;
    }
    return n;
  }
}

function draw(w: Float64Array, v: number, sum: number, uniform: number): number {
  let u = uniform * sum;
  let last = 0;
  for (let i = 0; i < v; i++) {
    if (w[i] === 0) continue;
    last = i;
    u -= w[i];
    if (u < 0) return i;
  }
  return last;
}

/** The k most likely tokens with their logprobs (of the sampling distribution), most likely first. */
function topK(logits: Float32Array, k: number, logprob: (i: number) => number): Map<number, number> {
  const ids: number[] = [];
  for (let i = 0; i < logits.length; i++) {
    if (ids.length < k) {
      ids.push(i);
      ids.sort((a, b) => logits[b] - logits[a] || a - b);
    } else if (logits[i] > logits[ids[k - 1]]) {
      ids[k - 1] = i;
      ids.sort((a, b) => logits[b] - logits[a] || a - b);
    }
  }
  return new Map(ids.map((i) => [i, logprob(i)]));
}
