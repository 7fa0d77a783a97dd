/**
 * The record of one GRPO step (a metrics.jsonl line): every grader's mean and std, reward,
 * advantages (their summary, and each sample's reward and advantage, so that two runs can be
 * compared step by step; in a control run with shuffled rewards, a marker), share of zero-variance groups, the trainer's loss/KL/clip figures, lengths,
 * tool calls, format validity, staleness and the timings of each phase.
 */
import type { StageName } from '../config/index';
import type { TrainResult } from '../queue/jobs';
import type { GradedGroup } from '../algo/grading';
import { formatValid } from '../sft/figures';
import { stat, type Stat } from './stats';

export interface StepTimings {
  /** Adding the rollout jobs to the queue. */
  enqueue_ms: number;
  /** From enqueueing to the last group complete (generation as the controller sees it). */
  rollout_ms: number;
  /** Grading every group and computing advantages. */
  grade_ms: number;
  /** From submitting the train job to its result. */
  update_ms: number;
  step_ms: number;
}

export interface StepRecordInput {
  stage: StageName;
  step: number;
  /** Update index of the step's train job; null when every group was skipped. */
  update: number | null;
  policyVersion: number;
  groups: GradedGroup[];
  result?: TrainResult;
  timings: StepTimings;
}

const round = (x: number) => Math.round(x * 1e6) / 1e6;
const short = (s: Stat) => ({ mean: round(s.mean), std: round(s.std) });

export function stepRecord(input: StepRecordInput) {
  const samples = input.groups.flatMap((g) =>
    g.trajectories.map((t, i) => ({ t, grade: g.grade.samples[i], adv: g.advantages[i], kept: g.kept })),
  );
  const graderNames = [...new Set(samples.flatMap((s) => Object.keys(s.grade.graders)))];
  const graders = Object.fromEntries(graderNames.map((n) => [n, short(stat(samples.map((s) => s.grade.graders[n]?.score ?? 0)))]));
  const kept = samples.filter((s) => s.kept);
  const adv = stat(kept.map((s) => s.adv));
  const episodes = samples.map((s) => s.t.episode);
  const staleness = input.update === null ? [] : kept.map((s) => input.update! - s.t.policy_version);
  const worker = (k: 'generate_ms' | 'tools_ms' | 'wall_ms') => round(stat(samples.map((s) => s.t.timing[k])).mean);
  const branched = input.groups.flatMap((g) => (g.branchTurn === undefined ? [] : [g.branchTurn]));
  const shuffledRewards = input.groups.some((g) => g.rewardOrder !== undefined);
  return {
    kind: 'grpo' as const,
    stage: input.stage,
    step: input.step,
    update: input.update,
    policy_version: input.policyVersion,
    groups: input.groups.length,
    kept_groups: input.groups.filter((g) => g.kept).length,
    zero_variance_share: round(input.groups.filter((g) => g.zeroVariance).length / Math.max(1, input.groups.length)),
    samples: samples.length,
    reward: short(stat(samples.map((s) => s.grade.total))),
    graders,
    advantage: { ...short(adv), min: round(adv.min), max: round(adv.max) },
    /** Each sample's reward and advantage, groups in slot order (refills included), samples in index order. */
    rewards: samples.map((s) => s.grade.total),
    advantages: samples.map((s) => s.adv),
    train: input.result?.metrics ?? {},
    response_tokens: round(stat(samples.map((s) => s.t.mask.reduce((a, b) => a + b, 0))).mean),
    total_tokens: round(stat(samples.map((s) => s.t.ids.length)).mean),
    tool_calls: round(stat(episodes.map((e) => e.tool_calls.length)).mean),
    format_valid: round(episodes.filter(formatValid).length / Math.max(1, episodes.length)),
    answered: round(episodes.filter((e) => e.stop_reason === 'answered').length / Math.max(1, episodes.length)),
    /** Branched groups (grpo.groups branch): the mean turn their samples branched at. */
    ...(branched.length > 0 && { branch_turn: round(stat(branched).mean) }),
    /** grpo.advantage.shuffle_rewards (a control run): the advantages came from rewards permuted within each group; reward, graders and rewards above are the true ones. */
    ...(shuffledRewards && { shuffled_rewards: true }),
    staleness: { mean: round(stat(staleness).mean), max: stat(staleness).max },
    timing: {
      ...input.timings,
      episode_generate_ms: worker('generate_ms'),
      episode_tools_ms: worker('tools_ms'),
      episode_wall_ms: worker('wall_ms'),
    },
    at: new Date().toISOString(),
  };
}

export type StepRecord = ReturnType<typeof stepRecord>;

/** The progress line's note for a step. */
export function stepNote(r: StepRecord): string {
  const loss = typeof r.train.loss === 'number' ? ` loss ${r.train.loss.toFixed(4)}` : '';
  return (
    `reward ${r.reward.mean.toFixed(3)}±${r.reward.std.toFixed(3)}${r.shuffled_rewards ? ' (advantages shuffled)' : ''} fmt ${r.format_valid.toFixed(2)} ` +
    `zero-var ${r.zero_variance_share.toFixed(2)} calls ${r.tool_calls.toFixed(1)}${loss} ` +
    `gen ${(r.timing.rollout_ms / 1000).toFixed(1)}s upd ${(r.timing.update_ms / 1000).toFixed(1)}s`
  );
}
