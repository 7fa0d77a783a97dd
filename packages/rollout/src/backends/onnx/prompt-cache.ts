/**
 * Key/values of recent prompts, so that a prompt which starts like one already prefilled runs
 * only its new tokens (vLLM's automatic prefix caching, for the onnx backend). An episode's next
 * turn is its last prompt plus the model's turn and the tool's result, and every case's first
 * turn starts with the same system prompt: in a GRPO step of the tiny-cpu preset about 90% of
 * the prompt tokens were such a prefix (scripts/bench/rollout-prefill.ts, docs/experiments.md).
 *
 * A prompt's key/values must not depend on what ran before it (else a resumed run, whose cache
 * starts empty, samples other tokens than the unbroken one: issue 29). A prefill from a cached
 * prefix differs from a whole one in the last bits, so every prompt is prefilled in chunks that
 * end at multiples of a fixed size, cached or not (the scheduler does), and only whole chunks are
 * taken from the cache: the same positions then come from the same computation either way.
 *
 * One cache per loaded policy version (other weights give other key/values). The least recently
 * used prompts leave first once the key/values held pass the budget; that changes what runs, not
 * what comes out.
 */
import * as ort from 'onnxruntime-node';
import type { CachedPrefix, Prefill } from './batch-cache';

/** What the cache holds for a prompt: the prompt itself ran before, or a prompt it starts with did. */
export type PromptHit = { kind: 'same'; logits: Float32Array; prefill: Prefill } | { kind: 'prefix'; from: CachedPrefix };

interface Entry {
  ids: number[];
  prefill: Prefill;
  /** The prompt's last position's logits. */
  logits: Float32Array;
  bytes: number;
}

export class PromptCache {
  /** Least recently used first. */
  private entries: Entry[] = [];
  private bytes = 0;

  constructor(private readonly budgetBytes: number) {}

  /**
   * A prompt that ran before is served as it came out then (the same key/values and logits, so
   * a repeated prompt samples as it did); else the cached prompt sharing the longest prefix with
   * it, and how many of its first `chunk`-sized chunks that prefix covers, in positions.
   */
  lookup(prompt: number[], chunk: number): PromptHit | undefined {
    let best: Entry | undefined;
    let bestLen = 0;
    for (const e of this.entries) {
      const n = Math.min(prompt.length, e.ids.length);
      let i = 0;
      while (i < n && e.ids[i] === prompt[i]) i++;
      // On a tie, the prompt itself over a longer one that starts with it.
      if (i > bestLen || (i === bestLen && best && e.ids.length === i)) [best, bestLen] = [e, i];
    }
    if (!best) return undefined;
    this.entries.splice(this.entries.indexOf(best), 1);
    this.entries.push(best);
    if (bestLen === prompt.length && best.ids.length === bestLen) return { kind: 'same', logits: best.logits, prefill: best.prefill };
    // Whole chunks only, and the prompt's last token runs for its logits.
    const len = Math.floor(Math.min(bestLen, prompt.length - 1) / chunk) * chunk;
    return len > 0 ? { kind: 'prefix', from: { prefill: best.prefill, len } } : undefined;
  }

  /** Holds a prompt's key/values and last logits, evicting the least recently used over budget. */
  add(ids: number[], prefill: Prefill, logits: Float32Array): void {
    const bytes = prefill.kv.reduce((sum, t) => sum + (t.data as Float32Array).byteLength, 0) + logits.byteLength;
    if (bytes > this.budgetBytes) return;
    const same = this.entries.findIndex((e) => e.ids.length === ids.length && e.ids.every((x, i) => x === ids[i]));
    if (same >= 0) this.drop(same);
    this.entries.push({ ids: [...ids], prefill, logits: logits.slice(), bytes });
    this.bytes += bytes;
    while (this.bytes > this.budgetBytes) this.drop(0);
  }

  private drop(i: number): void {
    this.bytes -= this.entries[i].bytes;
    this.entries.splice(i, 1);
  }
}

/** The first `len` positions of a [1, heads, positions, headDim] key/value tensor (itself when that is all of it). */
export function leadingPositions(kv: ort.Tensor, len: number): ort.Tensor {
  const [, heads, width, dim] = kv.dims;
  if (len === width) return kv;
  const src = kv.data as Float32Array;
  const dst = new Float32Array(heads * len * dim);
  for (let h = 0; h < heads; h++) dst.set(src.subarray(h * width * dim, (h * width + len) * dim), h * len * dim);
  return new ort.Tensor('float32', dst, [1, heads, len, dim]);
}
