/**
 * Recall@k and MRR over a table of truth ranks (ThinkFL Eq. 12-13, RCLAgent Eq. 9). A rank is
 * 0-based; null means the truth was absent from the answer. Rank tables exclude inapplicable
 * items (undefined ranks) before they get here. A fault's rank is its requests' best rank, or
 * their majority vote (RCLAgent Eq. 10).
 */

/** The k of Recall@k reported everywhere. */
export const RECALL_KS = [1, 2, 3, 5, 10] as const;

/** RCLAgent Eq. 9: a truth ranked below the top 10 counts as not found in MRR. */
export const MRR_CUTOFF = 10;

export interface RankSummary {
  /** Items (requests or faults) the figures are over. */
  n: number;
  /** Recall@k: share of items whose truth rank is < k (Eq. 12), keyed by k. */
  recall: Record<number, number>;
  /** Mean of 1/(rank+1), 0 for an absent truth (Eq. 13). */
  mrr: number;
  /** MRR with ranks beyond the top MRR_CUTOFF counted as absent (RCLAgent Eq. 9: rank infinity outside the top 10). */
  mrr_top10: number;
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
  const mrrOf = (cut: number) => (n === 0 ? 0 : ranks.reduce<number>((s, r) => s + (r === null || r >= cut ? 0 : 1 / (r + 1)), 0) / n);
  return { n, recall, mrr: mrrOf(Infinity), mrr_top10: mrrOf(MRR_CUTOFF), found: ranks.filter((r) => r !== null).length };
}

/** A fault's rank: the best (smallest) rank among its requests; null when no request found it. */
export function bestRank(ranks: (number | null)[]): number | null {
  let best: number | null = null;
  for (const r of ranks) if (r !== null && (best === null || r < best)) best = r;
  return best;
}

/**
 * RCLAgent Eq. 10, majority vote: the components the requests' top answers name, ordered by
 * votes (ties in first-seen order, as Python's Counter.most_common), and the truth's 0-based
 * place in that order; null when no request voted for it. A request without a top answer at
 * the level (undefined or null) casts no vote.
 */
export function voteRank(tops: (string | null | undefined)[], truth: string): number | null {
  const votes = new Map<string, number>();
  for (const t of tops) if (t) votes.set(t, (votes.get(t) ?? 0) + 1);
  // Array sort is stable, so equal counts keep the Map's first-seen order.
  const order = [...votes].sort((a, b) => b[1] - a[1]).map(([c]) => c);
  const i = order.indexOf(truth);
  return i < 0 ? null : i;
}

/** Requests per batch in RCLAgent's own group-rank evaluation script (group_rank_evaluate.py). */
export const VOTE_BATCH = 10;

/**
 * The mode of RCLAgent's evaluation script: a fault's requests, in order, cut into consecutive
 * batches of VOTE_BATCH, each batch ranked by its own vote; one rank per batch.
 */
export function batchVoteRanks(tops: (string | null | undefined)[], truth: string, batch = VOTE_BATCH): (number | null)[] {
  const out: (number | null)[] = [];
  for (let i = 0; i < tops.length; i += batch) out.push(voteRank(tops.slice(i, i + batch), truth));
  return out;
}
