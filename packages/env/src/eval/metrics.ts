/**
 * Recall@k and MRR over a table of truth ranks (ThinkFL Eq. 12-13). A rank is 0-based;
 * null means the truth was absent from the answer. Rank tables exclude inapplicable items
 * (undefined ranks) before they get here.
 */

/** The k of Recall@k reported everywhere. */
export const RECALL_KS = [1, 2, 3, 5, 10] as const;

export interface RankSummary {
  /** Items (requests or faults) the figures are over. */
  n: number;
  /** Recall@k: share of items whose truth rank is < k (Eq. 12), keyed by k. */
  recall: Record<number, number>;
  /** Mean of 1/(rank+1), 0 for an absent truth (Eq. 13). */
  mrr: number;
  /** Items whose truth appears anywhere in the answer. */
  found: number;
}

export function summarizeRanks(ranks: (number | null)[], ks: readonly number[] = RECALL_KS): RankSummary {
  for (const r of ranks) {
    if (r !== null && (!Number.isInteger(r) || r < 0)) throw new Error(`rank must be a non-negative integer or null, got ${r}`);
  }
  const n = ranks.length;
  const recall: Record<number, number> = {};
  for (const k of ks) recall[k] = n === 0 ? 0 : ranks.filter((r) => r !== null && r < k).length / n;
  const mrr = n === 0 ? 0 : ranks.reduce<number>((s, r) => s + (r === null ? 0 : 1 / (r + 1)), 0) / n;
  return { n, recall, mrr, found: ranks.filter((r) => r !== null).length };
}

/** A fault's rank: the best (smallest) rank among its requests; null when no request found it. */
export function bestRank(ranks: (number | null)[]): number | null {
  let best: number | null = null;
  for (const r of ranks) if (r !== null && (best === null || r < best)) best = r;
  return best;
}
