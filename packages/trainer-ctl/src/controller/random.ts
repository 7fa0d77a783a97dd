/** Seeded choices of the controller: the same seed string always gives the same order or number. */
import { createHash } from 'node:crypto';

/** A 32-bit unsigned integer derived from a string (first 4 bytes of its SHA-1). */
export function hash32(key: string): number {
  return createHash('sha1').update(key).digest().readUInt32BE(0);
}

/** A copy of `items` in a seeded order (Fisher-Yates driven by hash32 of seed and position). */
export function shuffled<T>(items: readonly T[], seed: string): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = hash32(`${seed}:${i}`) % (i + 1);
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}
