/**
 * The headroom probe (issue 26): how much better than its greedy answer a policy already samples.
 * Per case, the greedy walk is played to its branch turn (by default its answer turn, the last
 * model turn of the greedy episode: the print_results call that ended it, or the forced final
 * turn; or walk turn k), then k episodes continue that same prefix, token for token, and sample
 * from the branch turn on at temperature T (ModelPolicy's replay, as grpo.groups kind branch
 * plays a group with the same `at`). GRPO mostly reweights what a policy samples (pass@1
 * towards pass@k): where no sample ranks the root cause first, there is nothing for it to select.
 * Reciprocal ranks are of the root cause's service (env's rankOfTruth), 0 for no answer.
 */
import { rankOfTruth, runEpisode, type Case, type Dataset, type EpisodeRecord, type RootCause } from '@thinkfl/env';
import { ModelPolicy, type ChatModel, type GenerationBackend } from '@thinkfl/rollout';
import { branchTurnOf, replayTurns } from '../algo/groups/branch';
import { modelPolicySettings, type PlaySettings } from './solvers';

export interface ProbeSettings {
  /** Samples from the branch turn per case. */
  k: number;
  /** Sampling temperature of the branch turn and every turn after it. */
  temperature: number;
  /** Where the samples branch off the greedy walk, as grpo.groups kind branch's `at`: its answer turn, or after its first k turns (0: whole episodes). Default answer. */
  at?: 'answer' | number;
  /** Base seed; sample j of the i-th case probed plays with seed `seed + i * k + j`. */
  seed: number;
}

export interface CaseProbe {
  case_id: string;
  fault_id: string;
  /** Index of the greedy episode's last model turn. */
  answer_turn: number;
  /** Index of the turn the samples branch at (answer_turn for at: answer). */
  branch_turn: number;
  greedy: { answer: RootCause[] | null; rank: number | null; stop_reason: EpisodeRecord['stop_reason'] };
  /** Each sample's 0-based service rank of the root cause (null: absent or no answer). */
  sample_ranks: (number | null)[];
  /** Samples that ended with an answer. */
  sample_answered: number;
  greedy_rr: number;
  /** Best reciprocal rank among the k samples. */
  best_rr: number;
  /** Share of the k samples that rank the root cause's service first. */
  first_share: number;
}

export interface FaultProbe {
  fault_id: string;
  cases: number;
  /** Best greedy reciprocal rank among the fault's cases (per-fault MRR by best request). */
  greedy_rr: number;
  /** Best reciprocal rank among all samples of all its cases. */
  best_rr: number;
  /** Mean over its cases of the share of samples ranking the root cause first. */
  first_share: number;
  /** Cases where some sample ranks it first and greedy does not. */
  headroom_cases: number;
}

export interface ProbeSummary {
  cases: number;
  k: number;
  temperature: number;
  at: 'answer' | number;
  /**
   * Per request: mean greedy RR (MRR), mean best-of-k RR, mean share of samples ranked first, share of samples
   * answered, cases with headroom, and cases whose every sample ranks the root cause as greedy does (a group
   * branched there would have all-equal reciprocal-rank rewards: no signal for GRPO).
   */
  per_request: {
    greedy_mrr: number;
    best_of_k_mrr: number;
    first_share: number;
    answered_share: number;
    headroom_cases: number;
    greedy_rank_cases: number;
  };
  /** Per fault (best request): MRR of the greedy answers and of the best samples. */
  per_fault: { faults: number; greedy_mrr: number; best_of_k_mrr: number };
  faults: FaultProbe[];
  /** Faults where some sample ranks the root cause first and no greedy answer does. */
  headroom_faults: string[];
}

const rr = (rank: number | null): number => (rank === null ? 0 : 1 / (rank + 1));
const mean = (xs: number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

function serviceRank(dataset: Dataset, c: Case, record: EpisodeRecord): number | null {
  return rankOfTruth(record.answer, c.truth, 'service', dataset.topology) ?? null;
}

/** Probes one case: the greedy episode, then k samples branching at its branch turn. */
export async function probeCase(
  dataset: Dataset,
  c: Case,
  model: { chat: ChatModel; backend: GenerationBackend },
  play: PlaySettings,
  s: ProbeSettings,
  caseIndex: number,
): Promise<CaseProbe> {
  const protocol = play.protocol ?? 'rot';
  const greedyPolicy = new ModelPolicy({ backend: model.backend, chat: model.chat, settings: modelPolicySettings(play, 0) });
  const greedy = await runEpisode({ dataset, case: c, policy: greedyPolicy, protocol, settings: play.episode });
  const walk = greedyPolicy.trajectory();
  const answerTurn = Math.max(0, walk.turns.length - 1);
  // The branch point of grpo.groups kind branch (algo/groups/branch.ts), so the probe sees what such a group samples.
  const branchTurn = branchTurnOf(s.at ?? 'answer', walk.turns.length);
  const replay = replayTurns(walk.ids, walk.turns, greedy.messages, branchTurn, `probe: case ${c.id}`);
  const sampleRanks: (number | null)[] = [];
  let sampleAnswered = 0;
  for (let j = 0; j < s.k; j++) {
    const policy = new ModelPolicy({
      backend: model.backend,
      chat: model.chat,
      settings: modelPolicySettings(play, s.temperature, s.seed + caseIndex * s.k + j),
      replay,
    });
    const rec = await runEpisode({ dataset, case: c, policy, protocol, settings: play.episode });
    if (rec.answer) sampleAnswered++;
    sampleRanks.push(serviceRank(dataset, c, rec));
  }
  const greedyRank = serviceRank(dataset, c, greedy);
  const greedyRR = rr(greedyRank);
  return {
    case_id: c.id,
    fault_id: c.fault_id,
    answer_turn: answerTurn,
    branch_turn: branchTurn,
    greedy: { answer: greedy.answer, rank: greedyRank, stop_reason: greedy.stop_reason },
    sample_ranks: sampleRanks,
    sample_answered: sampleAnswered,
    greedy_rr: greedyRR,
    best_rr: Math.max(0, ...sampleRanks.map(rr)),
    first_share: s.k ? sampleRanks.filter((r) => r === 0).length / s.k : 0,
  };
}

const headroom = (p: CaseProbe): boolean => p.greedy.rank !== 0 && p.sample_ranks.some((r) => r === 0);

export function summarizeProbe(probes: CaseProbe[], s: ProbeSettings): ProbeSummary {
  const byFault = new Map<string, CaseProbe[]>();
  for (const p of probes) byFault.set(p.fault_id, [...(byFault.get(p.fault_id) ?? []), p]);
  const faults: FaultProbe[] = [...byFault].map(([faultId, ps]) => ({
    fault_id: faultId,
    cases: ps.length,
    greedy_rr: Math.max(...ps.map((p) => p.greedy_rr)),
    best_rr: Math.max(...ps.map((p) => p.best_rr)),
    first_share: mean(ps.map((p) => p.first_share)),
    headroom_cases: ps.filter(headroom).length,
  }));
  const samples = probes.length * s.k;
  return {
    cases: probes.length,
    k: s.k,
    temperature: s.temperature,
    at: s.at ?? 'answer',
    per_request: {
      greedy_mrr: mean(probes.map((p) => p.greedy_rr)),
      best_of_k_mrr: mean(probes.map((p) => p.best_rr)),
      first_share: mean(probes.map((p) => p.first_share)),
      answered_share: samples ? probes.reduce((a, p) => a + p.sample_answered, 0) / samples : 0,
      headroom_cases: probes.filter(headroom).length,
      greedy_rank_cases: probes.filter((p) => p.sample_ranks.every((r) => r === p.greedy.rank)).length,
    },
    per_fault: {
      faults: faults.length,
      greedy_mrr: mean(faults.map((f) => f.greedy_rr)),
      best_of_k_mrr: mean(faults.map((f) => f.best_rr)),
    },
    faults,
    headroom_faults: faults.filter((f) => f.greedy_rr < 1 && f.best_rr === 1).map((f) => f.fault_id),
  };
}

const f3 = (x: number): string => x.toFixed(3);

/** The probe's tables: per case, per fault, the totals and the faults with headroom. */
export function formatProbe(probes: CaseProbe[], sum: ProbeSummary): string {
  const lines = [
    `per case (k ${sum.k}, temperature ${sum.temperature}, branched at ${sum.at}): greedy RR, best of k, share ranked first, answered, answer turn, branch turn`,
  ];
  for (const p of probes) {
    lines.push(
      `  ${p.case_id}  ${f3(p.greedy_rr)}  ${f3(p.best_rr)}  ${f3(p.first_share)}  ${p.sample_answered}/${sum.k}  ${p.answer_turn}  ${p.branch_turn}`,
    );
  }
  lines.push('per fault: cases, greedy RR (best request), best of k, mean share ranked first, cases with headroom');
  for (const f of sum.faults)
    lines.push(`  ${f.fault_id}  ${f.cases}  ${f3(f.greedy_rr)}  ${f3(f.best_rr)}  ${f3(f.first_share)}  ${f.headroom_cases}`);
  const r = sum.per_request;
  lines.push(
    `per request (${sum.cases}): greedy MRR ${f3(r.greedy_mrr)}, best-of-${sum.k} MRR ${f3(r.best_of_k_mrr)}, share of samples ranked first ${f3(r.first_share)}, ` +
      `samples answered ${f3(r.answered_share)}, cases where a sample ranks it first and greedy does not: ${r.headroom_cases}, ` +
      `cases where every sample ranks it as greedy does: ${r.greedy_rank_cases}`,
    `per fault (${sum.per_fault.faults}, best request): greedy MRR ${f3(sum.per_fault.greedy_mrr)}, best-of-${sum.k} MRR ${f3(sum.per_fault.best_of_k_mrr)}`,
    `faults where a sample ranks the root cause first and greedy does not: ${sum.headroom_faults.length ? sum.headroom_faults.join(', ') : 'none'}`,
  );
  return lines.join('\n');
}
