/**
 * Memory-safe log-probabilities: a GRPO step on a tiny Qwen2 with the real 151,936-token vocabulary
 * never holds vocabulary-wide float32 logits for the whole batch. Its peak resident memory above
 * the step's start stays within a bound derived from the chunk size (4 chunk x vocab float32
 * buffers: logits, the softmax cross-entropy keeps, their gradient, one spare; plus 64 MiB for
 * everything vocabulary-independent); the same step with one chunk for the whole batch exceeds
 * that bound, so the measurement does see vocabulary-wide buffers.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TinyModelConfigSchema, TrainEngine } from '../src/engine';
import { SMALL_LAYOUT } from '../../../testkit/tiny-model';

const VOCAB = 151936;
const CHUNK = 128;
const BOUND = 4 * CHUNK * VOCAB * 4 + 64 * 2 ** 20;
const B = 2;
const T = 512;

// Deterministic pseudo-random token ids over the whole vocabulary.
const ids = Array.from({ length: B }, (_, b) => Array.from({ length: T }, (_, t) => (b * 7919 + t * 104729) % VOCAB));
const mask = ids.map((row) => row.map((_, t) => (t >= 16 ? 1 : 0)));
const step = { input_ids: ids, mask, advantages: [1, -1] };

describe('log-probabilities in chunks', () => {
  const dir = join(mkdtempSync(join(tmpdir(), 'logprob-memory-')), 'qwen2');
  const engine = new TrainEngine();

  beforeAll(async () => {
    const config = TinyModelConfigSchema.parse({
      architecture: 'qwen2',
      vocab_size: VOCAB,
      ...SMALL_LAYOUT,
    });
    await engine.request('create_tiny', { out_dir: dir, config, seed: 0 });
  });
  afterAll(async () => {
    await engine.shutdown();
  });

  /** Peak resident bytes above the start of the second GRPO step (the first creates the optimizer state). */
  async function stepPeak(chunk: number): Promise<number> {
    await engine.request('load', { model_dir: dir, logprob_chunk: chunk });
    await engine.request('grpo_step', step);
    const before = await engine.request('memory', { reset: true });
    await engine.request('grpo_step', step);
    const after = await engine.request('memory', {});
    return after.peak_rss - before.rss;
  }

  it(`stays within 4 x ${CHUNK} x ${VOCAB} float32 values (+64 MiB) for ${B} x ${T} tokens; one whole-batch chunk does not`, async () => {
    const chunked = await stepPeak(CHUNK);
    const whole = await stepPeak(B * T);
    expect(chunked).toBeLessThan(BOUND);
    expect(whole).toBeGreaterThan(BOUND);
  });
});
