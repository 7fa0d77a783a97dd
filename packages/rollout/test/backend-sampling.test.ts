/** The seeded RNG and the token sampler: determinism, nucleus membership, logprobs of the sampling distribution. */
import { describe, expect, it } from 'vitest';
import { Rng } from '@thinkfl/env';
import { TokenSampler } from '../src/backends/sampling';
import { resolveSampling } from '../src/backends/types';

const logitsOf = (probs: number[]) => Float32Array.from(probs, Math.log);

function draws(logits: Float32Array, sampling: object, n: number, seed = 1): number[] {
  const sampler = new TokenSampler();
  const rng = new Rng(seed);
  const s = resolveSampling(sampling);
  return Array.from({ length: n }, () => sampler.pick(logits, s, rng).token);
}

describe('Rng', () => {
  it('repeats a sequence for a seed, differs across seeds, stays in [0, 1)', () => {
    const seq = (seed: number) =>
      Array.from(
        { length: 1000 },
        (
          (r) => () =>
            r.next()
        )(new Rng(seed)),
      );
    const a = seq(42);
    expect(seq(42)).toEqual(a);
    expect(seq(43)).not.toEqual(a);
    expect(seq(2 ** 40 + 42)).not.toEqual(a);
    expect(Math.min(...a)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...a)).toBeLessThan(1);
    expect(a.reduce((x, y) => x + y, 0) / a.length).toBeCloseTo(0.5, 1);
    expect(() => new Rng(-1)).toThrow(/non-negative/);
  });
});

describe('TokenSampler', () => {
  const probs = [0.4, 0.3, 0.2, 0.1];

  it('samples only inside the nucleus, in proportion to the kept probabilities', () => {
    const half = draws(logitsOf(probs), { top_p: 0.5 }, 4000);
    expect(new Set(half)).toEqual(new Set([0, 1]));
    expect(half.filter((t) => t === 0).length / half.length).toBeCloseTo(0.4 / 0.7, 1);
    expect(new Set(draws(logitsOf(probs), { top_p: 0.75 }, 4000))).toEqual(new Set([0, 1, 2]));
    expect(new Set(draws(logitsOf(probs), {}, 4000))).toEqual(new Set([0, 1, 2, 3]));
  });

  it('is greedy at temperature 0 and reports logprobs of the distribution that sampled (temperature-scaled)', () => {
    const sampler = new TokenSampler();
    const greedy = sampler.pick(logitsOf(probs), resolveSampling({ temperature: 0, top_logprobs: 2 }), new Rng(1));
    expect(greedy.token).toBe(0);
    expect(greedy.logprob).toBeCloseTo(Math.log(0.4), 6);
    expect([...greedy.top!.keys()]).toEqual([0, 1]);
    const hot = sampler.pick(logitsOf(probs), resolveSampling({ temperature: 3, seed: 1 }), new Rng(7));
    // softmax(log p / T) = p^(1/T) / sum_j p_j^(1/T), by hand.
    const scaled = probs.map((p) => p ** (1 / 3));
    const z = scaled.reduce((a, b) => a + b, 0);
    expect(hot.logprob).toBeCloseTo(Math.log(scaled[hot.token] / z), 6);
    expect(Math.abs(hot.logprob - Math.log(probs[hot.token]))).toBeGreaterThan(1e-2);
  });

  it('picks the same tokens as a full sort of a 50k-token vocabulary', () => {
    const gen = new Rng(5);
    const logits = Float32Array.from({ length: 50_000 }, () => gen.next() * 12);
    const s = resolveSampling({ top_p: 0.9, temperature: 0.7 });
    const sampler = new TokenSampler();
    const fast = new Rng(9);
    const slow = new Rng(9);
    const max = Math.max(...logits);
    const w = Array.from(logits, (l) => Math.exp((l - max) / s.temperature));
    const total = w.reduce((a, b) => a + b, 0);
    const order = w.map((_, i) => i).sort((a, b) => w[b] - w[a] || a - b);
    let n = 0;
    for (let acc = 0; acc < total * s.top_p; n++) acc += w[order[n]];
    const kept = order.slice(0, n);
    const keptMass = kept.reduce((a, i) => a + w[i], 0);
    for (let k = 0; k < 200; k++) {
      let u = slow.next() * keptMass;
      const want = kept.find((i) => (u -= w[i]) < 0) ?? kept[kept.length - 1];
      expect(sampler.pick(logits, s, fast).token).toBe(want);
    }
  });
});
