/**
 * Evaluation of the current policy on the held-out cases: one greedy episode per case through
 * the rollout queue (stage 'eval'), scored by the environment's evaluator (Recall@k and MRR per
 * request and per fault) plus format validity; written to RUN_DIR/eval-<name>.json.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  evaluate,
  formatSummary,
  type Case,
  type Dataset,
  type EpisodeRecord,
  type EvalResult,
  type EvalSummary,
  type Level,
} from '@thinkfl/env';
import type { RunConfig } from '../config/index';
import type { RolloutJob, Trajectory } from '../queue/jobs';
import { hash32 } from './random';
import { appendEpisodes } from '../run-files/metrics-log';
import { episodeFigures, formatByType, validityByType, type TypeValidity } from '../sft/figures';
import type { ControlTransport } from './transport';

export interface EvalContext {
  config: RunConfig;
  runId: string;
  runDir: string;
  dataset: Dataset;
  cases: Case[];
  transport: ControlTransport;
}

export interface EvalReport {
  name: string;
  policy_version: number;
  cases: number;
  format_valid: number;
  answered: number;
  tool_calls: number;
  /** Format validity by the fault type of each held-out case, so a change can be judged per fault type. */
  format_valid_by_type: Record<string, TypeValidity>;
  summary: EvalSummary & { levels: Level[] };
  requests: ReturnType<typeof validityByType>['requests'];
}

/** Names the case too (hashed: case ids hold characters a job id may not), so a changed case list never reuses a group. */
export function evalGroupId(name: string, policyVersion: number, i: number, caseId: string): string {
  return `eval-${name}-v${policyVersion}-${i}-${hash32(caseId).toString(36)}`;
}

/**
 * Plays every case of `ctx.cases` greedily with the policy of `policyVersion` and scores it;
 * writes nothing (runEvaluation keeps a held-out evaluation's files, tracking its own line).
 */
export async function playGreedy(
  ctx: EvalContext,
  name: string,
  policyVersion: number,
): Promise<{ report: EvalReport; episodes: EpisodeRecord[] }> {
  const { config, transport } = ctx;
  const jobs: RolloutJob[] = ctx.cases.map((c, i) => ({
    run_id: ctx.runId,
    stage: 'eval',
    step: 0,
    group_id: evalGroupId(name, policyVersion, i, c.id),
    case_id: c.id,
    sample_index: 0,
    policy_version: policyVersion,
    temperature: config.generation.temperature.eval,
    seed: hash32(`${config.run.seed}:eval:${i}`),
  }));
  await transport.enqueueRollouts(jobs);
  const timeout = 3 * config.workers.rollout.job_timeout_s * 1000;
  const byCase = new Map<string, Trajectory>();
  await Promise.all(
    jobs.map(async (j) => {
      const [t] = await transport.waitGroup(j.group_id, 1, timeout);
      byCase.set(j.case_id, t);
    }),
  );
  const result = await evaluate(ctx.dataset, ctx.cases, async (c) => {
    const episode = byCase.get(c.id)!.episode;
    return { answer: episode.answer, episode };
  });
  const episodes = [...byCase.values()].map((t) => t.episode);
  const report = evalReport(name, policyVersion, ctx.cases.length, episodes, result);
  await transport.dropGroups(jobs.map((j) => j.group_id));
  return { report, episodes };
}

/** The eval-<name>.json report of a policy's greedy episodes and the evaluator's result on them. */
export function evalReport(name: string, policyVersion: number, cases: number, episodes: EpisodeRecord[], result: EvalResult): EvalReport {
  const { requests, by_type } = validityByType(episodes, result);
  return {
    name,
    policy_version: policyVersion,
    cases,
    ...episodeFigures(episodes),
    format_valid_by_type: by_type,
    summary: {
      levels: result.levels,
      per_request: result.per_request,
      per_fault: result.per_fault,
      per_fault_vote: result.per_fault_vote,
      faults_without_cases: result.faults_without_cases,
    },
    requests,
  };
}

/** A held-out evaluation: playGreedy, written to RUN_DIR/eval-<name>.json with a few of its episodes. */
export async function runEvaluation(ctx: EvalContext, name: string, policyVersion: number): Promise<EvalReport> {
  const { report, episodes } = await playGreedy(ctx, name, policyVersion);
  writeFileSync(join(ctx.runDir, `eval-${name}.json`), `${JSON.stringify(report, null, 1)}\n`);
  appendEpisodes(
    ctx.runDir,
    { eval: name },
    episodes.slice(0, ctx.config.logging.episodes_per_step).map((episode) => ({ episode })),
  );
  return report;
}

/** Printed after each evaluation. */
export function formatEvalReport(r: EvalReport): string {
  return (
    `eval ${r.name} (policy v${r.policy_version}, ${r.cases} held-out cases): format validity ${r.format_valid.toFixed(2)}, ` +
    `answered ${r.answered.toFixed(2)}, tool calls/episode ${r.tool_calls.toFixed(1)}\n` +
    `  format validity by fault type: ${formatByType(r.format_valid_by_type)}\n` +
    formatSummary(r.summary, r.summary.levels)
  );
}
