/**
 * The engine tests' smallest model and batch: a 2-layer Llama over 40 tokens with grouped-query
 * attention, three ragged "episodes" (a prompt, then generated tokens), and how far two results differ.
 */
import { expect } from 'vitest';
import { TinyModelConfigSchema } from '../src/engine';

export const TINY_VOCAB = 40;
export const TINY_CONFIG = TinyModelConfigSchema.parse({
  vocab_size: TINY_VOCAB,
  hidden_size: 32,
  num_hidden_layers: 2,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 16,
  intermediate_size: 64,
});
export const RAGGED_IDS = [
  [1, 5, 6, 7, 8, 9, 10, 2],
  [1, 5, 11, 12, 13, 2],
  [1, 7, 6, 5, 14, 15, 16, 17, 2],
];

/** The largest elementwise difference of two arrays of the same length (checked). */
export function maxDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  expect(a.length).toBe(b.length);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  return worst;
}
