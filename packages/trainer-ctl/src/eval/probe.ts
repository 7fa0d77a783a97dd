/**
 * The headroom probe (issue 26): how much better than its greedy answer a policy already samples.
 * Per case, the greedy walk is played to its answer turn (the last model turn of the greedy
 * episode: the print_results call that ended it, or the forced final turn), then k episodes
 * continue that same prefix, token for token, and sample from the answer turn on at
 * temperature T (ModelPolicy's replay, as grpo.groups kind branch with at: answer plays a
 * group). GRPO mostly reweights what a policy samples (pass@1 towards pass@k): where no
 * sample ranks the root cause first, there is nothing for it to select.
 * Reciprocal ranks are of the root cause's service (env's rankOfTruth), 0 for no answer.
 */
import { rankOfTruth, runEpisode, type Case, type Dataset, type EpisodeRecord, type RootCause } from '@thinkfl/env';
import { ModelPolicy, type ChatModel, type GenerationBackend } from '@thinkfl/rollout';
import { replayTurns } from '../algo/groups/branch';
import { modelPolicySettings, type PlaySettings } from './solvers';

export interface ProbeSettings {
  /** Samples from the answer turn per case. */
  k: number;
  /** Sampling temperature of the answer turn and any turn after it. */
  temperature: number;
  /** Base seed; sample j of the i-th case probed plays with seed `seed + i * k + j`. */
  seed: number;
}

export interface CaseProbe {
  caseId: string;
  faultId: string;
  /** The branch turn: index of the greedy episode's last model turn. */
  answerTurn: number;
  greedy: { answer: RootCause[] | null; rank: number | null; stopReason: EpisodeRecord['stop_reason'] };
  /** Each sample's 0-based service rank of the root cause (null: absent or no answer). */
  sampleRanks: (number | null)[];
  /** Samples that ended with an answer. */
  sampleAnswered: number;
  greedyRR: number;
  /** Best reciprocal rank among the k samples. */
  bestRR: number;
  /** Share of the k samples that rank the root cause's service first. */
  firstShare: number;
}

export interface FaultProbe {
  faultId: string;
  cases: number;
  /** Best greedy reciprocal rank among the fault's cases (per-fault MRR by best request). */
  greedyRR: number;
  /** Best reciprocal rank among all samples of all its cases. */
  bestRR: number;
  /** Mean over its cases of the share of samples ranking the root cause first. */
  firstShare: number;
  /** Cases where some sample ranks it first and greedy does not. */
  headroomCases: number;
}

export interface ProbeSummary {
  cases: number;
  k: number;
  temperature: number;
  /** Per request: mean greedy RR (MRR), mean best-of-k RR, mean share of samples ranked first, share of samples answered. */
  perRequest: { greedyMRR: number; bestOfKMRR: number; firstShare: number; answeredShare: number; headroomCases: number };
  /** Per fault (best request): MRR of the greedy answers and of the best samples. */
  perFault: { faults: number; greedyMRR: number; bestOfKMRR: number };
  faults: FaultProbe[];
  /** Faults where some sample ranks the root cause first and no greedy answer does. */
  headroomFaults: string[];
}

const rr = (rank: number | null): number => (rank === null ? 0 : 1 / (rank + 1));
const mean = (xs: number[]): number => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);

function serviceRank(dataset: Dataset, c: Case, record: EpisodeRecord): number | null {
  return rankOfTruth(record.answer, c.truth, 'service', dataset.topology) ?? null;
}

/** Probes one case: the greedy episode, then k samples branching at its answer turn. */
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
  // The branch point of grpo.groups kind branch at: answer (algo/groups/branch.ts), so the probe sees what such a group samples.
  const replay = replayTurns(walk.ids, walk.turns, greedy.messages, answerTurn, `probe: case ${c.id}`);
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
    caseId: c.id,
    faultId: c.faultId,
    answerTurn,
    greedy: { answer: greedy.answer, rank: greedyRank, stopReason: greedy.stop_reason },
    sampleRanks,
    sampleAnswered,
    greedyRR,
    bestRR: Math.max(0, ...sampleRanks.map(rr)),
    firstShare: s.k ? sampleRanks.filter((r) => r === 0).length / s.k : 0,
  };
}

const headroom = (p: CaseProbe): boolean => p.greedy.rank !== 0 && p.sampleRanks.some((r) => r === 0);

export function summarizeProbe(probes: CaseProbe[], s: ProbeSettings): ProbeSummary {
  const byFault = new Map<string, CaseProbe[]>();
  for (const p of probes) byFault.set(p.faultId, [...(byFault.get(p.faultId) ?? []), p]);
  const faults: FaultProbe[] = [...byFault].map(([faultId, ps]) => ({
    faultId,
    cases: ps.length,
    greedyRR: Math.max(...ps.map((p) => p.greedyRR)),
    bestRR: Math.max(...ps.map((p) => p.bestRR)),
    firstShare: mean(ps.map((p) => p.firstShare)),
    headroomCases: ps.filter(headroom).length,
  }));
  const samples = probes.length * s.k;
  return {
    cases: probes.length,
    k: s.k,
    temperature: s.temperature,
    perRequest: {
      greedyMRR: mean(probes.map((p) => p.greedyRR)),
      bestOfKMRR: mean(probes.map((p) => p.bestRR)),
      firstShare: mean(probes.map((p) => p.firstShare)),
      answeredShare: samples ? probes.reduce((a, p) => a + p.sampleAnswered, 0) / samples : 0,
      headroomCases: probes.filter(headroom).length,
    },
    perFault: { faults: faults.length, greedyMRR: mean(faults.map((f) => f.greedyRR)), bestOfKMRR: mean(faults.map((f) => f.bestRR)) },
    faults,
    headroomFaults: faults.filter((f) => f.greedyRR < 1 && f.bestRR === 1).map((f) => f.faultId),
  };
}

const f3 = (x: number): string => x.toFixed(3);

/** The probe's tables: per case, per fault, the totals and the faults with headroom. */
export function formatProbe(probes: CaseProbe[], sum: ProbeSummary): string {
  const lines = [`per case (k ${sum.k}, temperature ${sum.temperature}): greedy RR, best of k, share ranked first, answered, answer turn`];
  for (const p of probes) {
    lines.push(`  ${p.caseId}  ${f3(p.greedyRR)}  ${f3(p.bestRR)}  ${f3(p.firstShare)}  ${p.sampleAnswered}/${sum.k}  ${p.answerTurn}`);
  }
  lines.push('per fault: cases, greedy RR (best request), best of k, mean share ranked first, cases with headroom');
  for (const f of sum.faults)
    lines.push(`  ${f.faultId}  ${f.cases}  ${f3(f.greedyRR)}  ${f3(f.bestRR)}  ${f3(f.firstShare)}  ${f.headroomCases}`);
  const r = sum.perRequest;
  lines.push(
    `per request (${sum.cases}): greedy MRR ${f3(r.greedyMRR)}, best-of-${sum.k} MRR ${f3(r.bestOfKMRR)}, share of samples ranked first ${f3(r.firstShare)}, ` +
      `samples answered ${f3(r.answeredShare)}, cases where a sample ranks it first and greedy does not: ${r.headroomCases}`,
    `per fault (${sum.perFault.faults}, best request): greedy MRR ${f3(sum.perFault.greedyMRR)}, best-of-${sum.k} MRR ${f3(sum.perFault.bestOfKMRR)}`,
    `faults where a sample ranks the root cause first and greedy does not: ${sum.headroomFaults.length ? sum.headroomFaults.join(', ') : 'none'}`,
  );
  return lines.join('\n');
}
