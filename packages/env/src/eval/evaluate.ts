/**
 * Plays a policy on cases and scores its answers: truth rank per request at each level,
 * each fault's best rank among its requests, and Recall@k/MRR over both.
 */
import type { Case, Dataset, EpisodeRecord, GroundTruth, Level, RootCause } from '../types';
import { rankOfTruth } from './match';
import { bestRank, summarizeRanks, type RankSummary } from './metrics';
import { voteRank } from './vote-rank';

/** What solving one case produced: the ranked answer, and the episode when a protocol was played. */
export interface SolveResult {
  answer: RootCause[] | null;
  episode?: EpisodeRecord;
}

export type Solve = (c: Case) => Promise<SolveResult>;

export interface RequestResult {
  caseId: string;
  faultId: string;
  answer: RootCause[] | null;
  /** Truth rank per applicable level (null: absent). */
  ranks: Partial<Record<Level, number | null>>;
  stopReason?: EpisodeRecord['stopReason'];
  toolCalls?: number;
  /** Set when solving threw; the request then counts as a miss. */
  error?: string;
}

export interface FaultResult {
  faultId: string;
  type: string;
  truth: GroundTruth;
  cases: number;
  /** Best rank among the fault's requests per applicable level. */
  ranks: Partial<Record<Level, number | null>>;
  /** Rank by majority vote of the requests' top-1 answers per applicable level (RCLAgent Eq. 10). */
  voteRanks: Partial<Record<Level, number | null>>;
}

export interface EvalSummary {
  perRequest: Partial<Record<Level, RankSummary>>;
  perFault: Partial<Record<Level, RankSummary>>;
  /** Per fault by majority vote (RCLAgent Eq. 10) instead of the best request. */
  perFaultVote: Partial<Record<Level, RankSummary>>;
  /** Faults of the dataset that have no case and so cannot be scored. */
  faultsWithoutCases: string[];
}

export interface EvalResult extends EvalSummary {
  levels: Level[];
  requests: RequestResult[];
  faults: FaultResult[];
}

export interface EvaluateOptions {
  /** Cases solved at once (episodes are I/O-free here, so this only interleaves async work). */
  concurrency?: number;
  onProgress?: (done: number, total: number, last: RequestResult) => void;
}

const ALL_LEVELS: Level[] = ['service', 'pod', 'node'];

/**
 * Whether a truth is scored at a level: service and pod when it names one; node only for
 * faults labelled at node level (a pod fault's host is not what the label blames).
 */
function scoredAt(dataset: Dataset, truth: GroundTruth, level: Level): boolean {
  if (level === 'node' && truth.level !== 'node') return false;
  return rankOfTruth([], truth, level, dataset.topology) !== undefined;
}

/** Levels at which at least one of the cases' truths is scored. */
export function applicableLevels(dataset: Dataset, cases: Case[]): Level[] {
  return ALL_LEVELS.filter((l) => cases.some((c) => scoredAt(dataset, c.truth, l)));
}

function ranksOf(dataset: Dataset, c: Case, answer: RootCause[] | null, levels: Level[]): RequestResult['ranks'] {
  const ranks: RequestResult['ranks'] = {};
  for (const l of levels) {
    if (!scoredAt(dataset, c.truth, l)) continue;
    const r = rankOfTruth(answer, c.truth, l, dataset.topology);
    if (r !== undefined) ranks[l] = r;
  }
  return ranks;
}

async function solveOne(dataset: Dataset, c: Case, solve: Solve, levels: Level[]): Promise<RequestResult> {
  const base = { caseId: c.id, faultId: c.faultId };
  try {
    const { answer, episode } = await solve(c);
    return {
      ...base,
      answer,
      ranks: ranksOf(dataset, c, answer, levels),
      ...(episode ? { stopReason: episode.stopReason, toolCalls: episode.toolCalls.length } : {}),
    };
  } catch (err) {
    return { ...base, answer: null, ranks: ranksOf(dataset, c, null, levels), error: (err as Error).message };
  }
}

/** Summaries over request and fault results (also used to re-summarise a saved result). */
export function summarize(dataset: Dataset, levels: Level[], requests: RequestResult[], faults: FaultResult[]): EvalSummary {
  const perRequest: EvalSummary['perRequest'] = {};
  const perFault: EvalSummary['perFault'] = {};
  const perFaultVote: EvalSummary['perFaultVote'] = {};
  for (const l of levels) {
    perRequest[l] = summarizeRanks(requests.filter((r) => l in r.ranks).map((r) => r.ranks[l] ?? null));
    perFault[l] = summarizeRanks(faults.filter((f) => l in f.ranks).map((f) => f.ranks[l] ?? null));
    perFaultVote[l] = summarizeRanks(faults.filter((f) => l in f.voteRanks).map((f) => f.voteRanks[l] ?? null));
  }
  const faultIds = new Set(faults.map((f) => f.faultId));
  const faultsWithoutCases = dataset.faults.filter((f) => f.caseCount === 0 && !faultIds.has(f.id)).map((f) => f.id);
  return { perRequest, perFault, perFaultVote, faultsWithoutCases };
}

export async function evaluate(dataset: Dataset, cases: Case[], solve: Solve, opts: EvaluateOptions = {}): Promise<EvalResult> {
  const levels = applicableLevels(dataset, cases);
  const requests: RequestResult[] = new Array(cases.length);
  let next = 0;
  let done = 0;
  const worker = async (): Promise<void> => {
    while (next < cases.length) {
      const i = next++;
      requests[i] = await solveOne(dataset, cases[i], solve, levels);
      done++;
      opts.onProgress?.(done, cases.length, requests[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, opts.concurrency ?? 1) }, worker));

  const byFault = new Map<string, RequestResult[]>();
  for (const r of requests) {
    const list = byFault.get(r.faultId);
    if (list) list.push(r);
    else byFault.set(r.faultId, [r]);
  }
  const faultInfo = new Map(dataset.faults.map((f) => [f.id, f]));
  const faults: FaultResult[] = [...byFault].map(([faultId, rs]) => {
    const f = faultInfo.get(faultId);
    const truth = f?.truth ?? cases.find((c) => c.faultId === faultId)!.truth;
    const ranks: FaultResult['ranks'] = {};
    const voteRanks: FaultResult['voteRanks'] = {};
    for (const l of levels) {
      const applicable = rs.filter((r) => l in r.ranks);
      if (!applicable.length) continue;
      ranks[l] = bestRank(applicable.map((r) => r.ranks[l] ?? null));
      voteRanks[l] = voteRank(applicable.map((r) => r.answer), truth, l, dataset.topology) ?? null;
    }
    return { faultId, type: f?.type ?? 'unknown', truth, cases: rs.length, ranks, voteRanks };
  });
  return { levels, requests, faults, ...summarize(dataset, levels, requests, faults) };
}
