/**
 * Seeded pseudo-random numbers for sampling (xoshiro128**, seeded through splitmix32), so
 * that the same seed gives the same tokens on every machine; Math.random cannot be seeded.
 */
import { randomInt } from 'node:crypto';

export class Rng {
  private s = new Uint32Array(4);

  constructor(seed: number) {
    if (!Number.isSafeInteger(seed) || seed < 0) throw new Error(`seed must be a non-negative safe integer, got ${seed}`);
    let x = (seed >>> 0) ^ Math.floor(seed / 2 ** 32);
    for (let i = 0; i < 4; i++) {
      x = (x + 0x9e3779b9) | 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      this.s[i] = (z ^ (z >>> 16)) >>> 0;
    }
    if (this.s.every((v) => v === 0)) this.s[0] = 1;
  }

  /** Next uint32. */
  nextU32(): number {
    const s = this.s;
    const r = Math.imul(rotl(Math.imul(s[1], 5), 7), 9) >>> 0;
    const t = s[1] << 9;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 11);
    return r;
  }

  /** Uniform in [0, 1) with 53 random bits. */
  next(): number {
    const hi = this.nextU32() >>> 5;
    const lo = this.nextU32() >>> 6;
    return (hi * 67108864 + lo) / 9007199254740992;
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}

/** A seed for requests that give none. */
export function randomSeed(): number {
  return randomInt(2 ** 32);
}
