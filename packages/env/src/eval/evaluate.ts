/**
 * Plays a policy on cases and scores its answers: truth rank per request at each level,
 * each fault's best rank among its requests and its rank by majority vote of the requests'
 * top answers (RCLAgent Eq. 10, also in the batches of RCLAgent's own script), and
 * Recall@k/MRR over each.
 */
import type { Case, Dataset, EpisodeRecord, GroundTruth, Level, RootCause } from '../types';
import { componentAt, faultTypeRank, rankOfTruth } from './match';
import { batchVoteRanks, bestRank, summarizeRanks, voteRank, type RankSummary } from './metrics';

/** What solving one case produced: the ranked answer, and the episode when a protocol was played. */
export interface SolveResult {
  answer: RootCause[] | null;
  episode?: EpisodeRecord;
}

export type Solve = (c: Case) => Promise<SolveResult>;

export interface RequestResult {
  case_id: string;
  fault_id: string;
  answer: RootCause[] | null;
  /** Truth rank per applicable level (null: absent). */
  ranks: Partial<Record<Level, number | null>>;
  /** Rank of the true fault type when the top service is right (KnowledgeMind FT@k); null: wrong service or type not given. */
  type_rank: number | null;
  /** Per applicable level, the component the answer's first item naming one there names (its vote); null: none. */
  top: Partial<Record<Level, string | null>>;
  stop_reason?: EpisodeRecord['stop_reason'];
  tool_calls?: number;
  /** Set when solving threw; the request then counts as a miss. */
  error?: string;
}

export interface FaultResult {
  fault_id: string;
  type: string;
  truth: GroundTruth;
  cases: number;
  /** Best rank among the fault's requests per applicable level. */
  ranks: Partial<Record<Level, number | null>>;
  /** Rank by majority vote of all the fault's requests (Eq. 10) per applicable level. */
  vote_ranks: Partial<Record<Level, number | null>>;
  /** Ranks by vote within consecutive batches of VOTE_BATCH requests (RCLAgent's script), per applicable level. */
  batch_vote_ranks: Partial<Record<Level, (number | null)[]>>;
}

export interface EvalSummary {
  per_request: Partial<Record<Level, RankSummary>>;
  /** Faults ranked by their best request. */
  per_fault: Partial<Record<Level, RankSummary>>;
  /** Faults ranked by majority vote of their requests' top answers (RCLAgent Eq. 10); absent in summaries saved before it existed. */
  per_fault_vote?: Partial<Record<Level, RankSummary>>;
  /** Batches of VOTE_BATCH requests of one fault, each ranked by its vote (RCLAgent's evaluation script); absent as above. */
  per_batch_vote?: Partial<Record<Level, RankSummary>>;
  /** Requests by the fault type within the top k with the top service right: recall[k] is KnowledgeMind's FT@k. */
  per_request_type?: RankSummary;
  /** Faults of the dataset that have no case and so cannot be scored. */
  faults_without_cases: string[];
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

function topsOf(dataset: Dataset, c: Case, answer: RootCause[] | null, levels: Level[]): RequestResult['top'] {
  const top: RequestResult['top'] = {};
  for (const l of levels) {
    if (!scoredAt(dataset, c.truth, l)) continue;
    const first = (answer ?? []).map((item) => componentAt(item, l, dataset.topology)).find((x) => x !== undefined);
    top[l] = first ?? null;
  }
  return top;
}

function typeRankOf(dataset: Dataset, c: Case, answer: RootCause[] | null): number | null {
  const type = dataset.faults.find((f) => f.id === c.fault_id)?.type;
  return type ? faultTypeRank(answer, c.truth, type, c.truth.service ? 'service' : c.truth.level, dataset.topology) : null;
}

async function solveOne(dataset: Dataset, c: Case, solve: Solve, levels: Level[]): Promise<RequestResult> {
  const base = { case_id: c.id, fault_id: c.fault_id };
  try {
    const { answer, episode } = await solve(c);
    return {
      ...base,
      answer,
      ranks: ranksOf(dataset, c, answer, levels),
      type_rank: typeRankOf(dataset, c, answer),
      top: topsOf(dataset, c, answer, levels),
      ...(episode ? { stop_reason: episode.stop_reason, tool_calls: episode.tool_calls.length } : {}),
    };
  } catch (err) {
    return {
      ...base,
      answer: null,
      ranks: ranksOf(dataset, c, null, levels),
      type_rank: null,
      top: topsOf(dataset, c, null, levels),
      error: (err as Error).message,
    };
  }
}

/** Summaries over request and fault results (also used to re-summarise a saved result). */
export function summarize(dataset: Dataset, levels: Level[], requests: RequestResult[], faults: FaultResult[]): EvalSummary {
  const perRequest: EvalSummary['per_request'] = {};
  const perFault: EvalSummary['per_fault'] = {};
  const perFaultVote: Partial<Record<Level, RankSummary>> = {};
  const perBatchVote: Partial<Record<Level, RankSummary>> = {};
  for (const l of levels) {
    perRequest[l] = summarizeRanks(requests.filter((r) => l in r.ranks).map((r) => r.ranks[l] ?? null));
    const scored = faults.filter((f) => l in f.ranks);
    perFault[l] = summarizeRanks(scored.map((f) => f.ranks[l] ?? null));
    perFaultVote[l] = summarizeRanks(scored.map((f) => f.vote_ranks[l] ?? null));
    perBatchVote[l] = summarizeRanks(scored.flatMap((f) => f.batch_vote_ranks[l] ?? []));
  }
  const faultIds = new Set(faults.map((f) => f.fault_id));
  const faultsWithoutCases = dataset.faults.filter((f) => f.case_count === 0 && !faultIds.has(f.id)).map((f) => f.id);
  const perRequestType = summarizeRanks(requests.map((r) => r.type_rank ?? null));
  return {
    per_request: perRequest,
    per_fault: perFault,
    per_fault_vote: perFaultVote,
    per_batch_vote: perBatchVote,
    per_request_type: perRequestType,
    faults_without_cases: faultsWithoutCases,
  };
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
    const list = byFault.get(r.fault_id);
    if (list) list.push(r);
    else byFault.set(r.fault_id, [r]);
  }
  const faultInfo = new Map(dataset.faults.map((f) => [f.id, f]));
  const faults: FaultResult[] = [...byFault].map(([faultId, rs]) => {
    const f = faultInfo.get(faultId);
    const ranks: FaultResult['ranks'] = {};
    const voteRanks: FaultResult['vote_ranks'] = {};
    const batches: FaultResult['batch_vote_ranks'] = {};
    const truth = f?.truth ?? cases.find((c) => c.fault_id === faultId)!.truth;
    for (const l of levels) {
      const applicable = rs.filter((r) => l in r.ranks);
      if (!applicable.length) continue;
      ranks[l] = bestRank(applicable.map((r) => r.ranks[l] ?? null));
      const want = componentAt(truth, l, dataset.topology);
      const tops = applicable.map((r) => r.top[l]);
      voteRanks[l] = want === undefined ? null : voteRank(tops, want);
      batches[l] = want === undefined ? [] : batchVoteRanks(tops, want);
    }
    return {
      fault_id: faultId,
      type: f?.type ?? 'unknown',
      truth,
      cases: rs.length,
      ranks,
      vote_ranks: voteRanks,
      batch_vote_ranks: batches,
    };
  });
  return { levels, requests, faults, ...summarize(dataset, levels, requests, faults) };
}
