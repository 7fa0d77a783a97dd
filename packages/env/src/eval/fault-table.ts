/**
 * A policy's figures per fault at service level (best rank among its requests, rank by the
 * majority vote of its requests, mean reciprocal rank of its requests), what the expert's
 * regression table pins and what its leave-one-fault-out split chooses by, and summaries of
 * them by fault type. Built from plain request outcomes, so a result of an older commit (whose
 * evaluation lacked votes) is tabled by the same code.
 */
import type { EvalResult } from './evaluate';
import { batchVoteRanks, bestRank, summarizeRanks, voteRank } from './metrics';

export interface RequestOutcome {
  faultId: string;
  /** 0-based rank of the true service in the answer; null: absent. */
  rank: number | null;
  /** The service the answer names first (the request's vote); null: none. */
  top: string | null;
}

export interface FaultInfo {
  faultId: string;
  type: string;
  service: string;
}

export interface FaultRow extends FaultInfo {
  requests: number;
  best: number | null;
  vote: number | null;
  /** Mean reciprocal rank of the fault's requests, rounded to 3 decimals (as pinned). */
  requestMrr: number;
  /** Requests whose answer holds the truth within its first 10 (Recall@10). */
  top10: number;
  /** Rank by vote within each consecutive batch of 10 requests (RCLAgent-V2's evaluation script). */
  batchVotes: (number | null)[];
}

const round3 = (x: number): number => Math.round(1000 * x) / 1000;

export function faultRows(faults: FaultInfo[], requests: RequestOutcome[]): FaultRow[] {
  return faults.map((f) => {
    const rs = requests.filter((r) => r.faultId === f.faultId);
    return {
      ...f,
      requests: rs.length,
      best: bestRank(rs.map((r) => r.rank)),
      vote: voteRank(
        rs.map((r) => r.top),
        f.service,
      ),
      requestMrr: round3(summarizeRanks(rs.map((r) => r.rank)).mrr),
      top10: rs.filter((r) => r.rank !== null && r.rank < 10).length,
      batchVotes: batchVoteRanks(
        rs.map((r) => r.top),
        f.service,
      ),
    };
  });
}

/** The service-level outcomes of an evaluation (faults in the evaluation's order). */
export function outcomesOf(r: EvalResult): { faults: FaultInfo[]; requests: RequestOutcome[] } {
  return {
    faults: r.faults.map((f) => ({ faultId: f.fault_id, type: f.type, service: f.truth.service ?? '' })),
    requests: r.requests.map((q) => ({ faultId: q.fault_id, rank: q.ranks.service ?? null, top: q.top.service ?? null })),
  };
}

export interface TypeSummary {
  faults: number;
  requests: number;
  /** Per-fault MRR by best request and by vote; per-request MRR and Recall@10 over all the faults' requests. */
  best: number;
  vote: number;
  request: number;
  requestR10: number;
  /** MRR over every batch of 10 requests, each ranked by its own vote (RCLAgent-V2's script). */
  batch: number;
}

export function summarizeRows(rows: FaultRow[]): TypeSummary {
  const n = rows.reduce((a, r) => a + r.requests, 0);
  return {
    faults: rows.length,
    requests: n,
    best: summarizeRanks(rows.map((r) => r.best)).mrr,
    vote: summarizeRanks(rows.map((r) => r.vote)).mrr,
    request: n === 0 ? 0 : rows.reduce((a, r) => a + r.requestMrr * r.requests, 0) / n,
    requestR10: n === 0 ? 0 : rows.reduce((a, r) => a + r.top10, 0) / n,
    batch: summarizeRanks(rows.flatMap((r) => r.batchVotes)).mrr,
  };
}

/** Fault types in the rows, sorted. */
export const faultTypes = (rows: FaultRow[]): string[] => [...new Set(rows.map((r) => r.type))].sort();

const worse = (now: number | null, then: number | null): boolean => now !== then && (now === null || (then !== null && now > then));

/**
 * Faults whose figures moved against a pinned table: `lowered` names each fault and measure that
 * got worse (a later best or vote rank, a lower request MRR, fewer requests in the top 10, a
 * lower MRR of its batch votes), `raised` each that got better or changed without getting
 * worse; a fault missing from the table counts as raised, one no longer evaluated as lowered.
 */
export function compareRows(pinned: FaultRow[], now: FaultRow[]): { lowered: string[]; raised: string[] } {
  const lowered: string[] = [];
  const raised: string[] = [];
  const byId = new Map(now.map((r) => [r.faultId, r]));
  for (const p of pinned) {
    const r = byId.get(p.faultId);
    if (!r) {
      lowered.push(`${p.faultId}: no longer evaluated`);
      continue;
    }
    for (const m of ['best', 'vote'] as const) {
      if (worse(r[m], p[m])) lowered.push(`${p.faultId} ${m} rank ${p[m]} -> ${r[m]}`);
      else if (worse(p[m], r[m])) raised.push(`${p.faultId} ${m} rank ${p[m]} -> ${r[m]}`);
    }
    if (r.requestMrr < p.requestMrr) lowered.push(`${p.faultId} request MRR ${p.requestMrr} -> ${r.requestMrr}`);
    else if (r.requestMrr > p.requestMrr) raised.push(`${p.faultId} request MRR ${p.requestMrr} -> ${r.requestMrr}`);
    if (r.top10 < p.top10) lowered.push(`${p.faultId} requests in the top 10 ${p.top10} -> ${r.top10}`);
    else if (r.top10 > p.top10) raised.push(`${p.faultId} requests in the top 10 ${p.top10} -> ${r.top10}`);
    const batches = summarizeRanks(r.batchVotes).mrr - summarizeRanks(p.batchVotes).mrr;
    if (batches < -1e-9) lowered.push(`${p.faultId} batch vote ranks ${JSON.stringify(p.batchVotes)} -> ${JSON.stringify(r.batchVotes)}`);
    else if (batches > 1e-9 || JSON.stringify(r.batchVotes) !== JSON.stringify(p.batchVotes))
      raised.push(`${p.faultId} batch vote ranks ${JSON.stringify(p.batchVotes)} -> ${JSON.stringify(r.batchVotes)}`);
  }
  for (const r of now) if (!pinned.some((p) => p.faultId === r.faultId)) raised.push(`${r.faultId}: not in the table`);
  return { lowered, raised };
}
