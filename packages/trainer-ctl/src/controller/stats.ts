/** Small summaries the metrics records are made of. */

export interface Stat {
  mean: number;
  std: number;
  min: number;
  max: number;
}

/** Mean, population std, min and max; all 0 for no values (a step may keep no group). */
export function stat(xs: readonly number[]): Stat {
  if (xs.length === 0) return { mean: 0, std: 0, min: 0, max: 0 };
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  const std = Math.sqrt(xs.reduce((a, x) => a + (x - mean) ** 2, 0) / xs.length);
  return { mean, std, min: Math.min(...xs), max: Math.max(...xs) };
}
