/**
 * A policy's figures per fault at service level (best rank among its requests, rank by the
 * majority vote of its requests, mean reciprocal rank of its requests), what the expert's
 * regression table pins and what its leave-one-fault-out split chooses by, and summaries of
 * them by fault type. Built from plain request outcomes, so a result of an older commit (whose
 * evaluation lacked votes) is tabled by the same code.
 */
import type { EvalResult } from '../eval/evaluate';
import { bestRank, summarizeRanks, voteRank } from '../eval/metrics';

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
}

const round3 = (x: number): number => Math.round(1000 * x) / 1000;

export function faultRows(faults: FaultInfo[], requests: RequestOutcome[]): FaultRow[] {
  return faults.map((f) => {
    const rs = requests.filter((r) => r.faultId === f.faultId);
    return {
      ...f,
      requests: rs.length,
      best: bestRank(rs.map((r) => r.rank)),
      vote: voteRank(rs.map((r) => r.top), f.service),
      requestMrr: round3(summarizeRanks(rs.map((r) => r.rank)).mrr),
    };
  });
}

/** The service-level outcomes of an evaluation (faults in the evaluation's order). */
export function outcomesOf(r: EvalResult): { faults: FaultInfo[]; requests: RequestOutcome[] } {
  return {
    faults: r.faults.map((f) => ({ faultId: f.faultId, type: f.type, service: f.truth.service ?? '' })),
    requests: r.requests.map((q) => ({ faultId: q.faultId, rank: q.ranks.service ?? null, top: q.top.service ?? null })),
  };
}

export interface TypeSummary {
  faults: number;
  requests: number;
  /** Per-fault MRR by best request and by vote; per-request MRR over all the faults' requests. */
  best: number;
  vote: number;
  request: number;
}

export function summarizeRows(rows: FaultRow[]): TypeSummary {
  const n = rows.reduce((a, r) => a + r.requests, 0);
  return {
    faults: rows.length,
    requests: n,
    best: summarizeRanks(rows.map((r) => r.best)).mrr,
    vote: summarizeRanks(rows.map((r) => r.vote)).mrr,
    request: n === 0 ? 0 : rows.reduce((a, r) => a + r.requestMrr * r.requests, 0) / n,
  };
}

/** Fault types in the rows, sorted. */
export const faultTypes = (rows: FaultRow[]): string[] => [...new Set(rows.map((r) => r.type))].sort();

const worse = (now: number | null, then: number | null): boolean => now !== then && (now === null || (then !== null && now > then));

/**
 * Faults whose figures moved against a pinned table: `lowered` names each fault and measure that
 * got worse (a later best or vote rank, a lower request MRR), `raised` each that got better;
 * faults missing from either side count as changed.
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
  }
  for (const r of now) if (!pinned.some((p) => p.faultId === r.faultId)) raised.push(`${r.faultId}: not in the table`);
  return { lowered, raised };
}
