/**
 * Grading a complete group with its stage's reward and turning the totals into advantages.
 * Graders see the whole group in sample order; the question id is the case id, so the
 * diversity cache counts a path once per question across every step and grader process, and
 * the group id names the samples there, so a step replayed after a kill grades its groups
 * exactly as the first time (the cache already holds their paths, as their own). A control run
 * (grpo.advantage.shuffle_rewards) hands in the order in which the totals reach the estimator.
 */
import type { Case, Dataset } from '@thinkfl/env';
import { gradeGroup, type DiversityCache, type GroupGrade } from '@thinkfl/graders';
import type { RunConfig, StageName } from '../config/index';
import { allEqual, computeAdvantages, keepGroup } from './core/advantages';
import type { Trajectory } from '../queue/jobs';

export interface GradedGroup {
  groupId: string;
  caseId: string;
  trajectories: Trajectory[];
  grade: GroupGrade;
  advantages: number[];
  /** False when skip_equal_groups left it out of the batch. */
  kept: boolean;
  zeroVariance: boolean;
  /** Turns its samples shared before they branched (grpo.groups branch); absent for whole-episode groups. */
  branchTurn?: number;
  /**
   * grpo.advantage.shuffle_rewards: sample i's advantage came from the reward of sample
   * rewardOrder[i] (a permutation of 0..G-1); absent when the advantages follow the samples' own rewards.
   */
  rewardOrder?: number[];
}

export interface GradingContext {
  config: RunConfig;
  dataset: Dataset;
  diversity?: DiversityCache;
}

export async function gradeTrajectories(
  ctx: GradingContext,
  stage: StageName,
  groupId: string,
  c: Case,
  trajectories: Trajectory[],
  rewardOrder?: readonly number[],
): Promise<GradedGroup> {
  const { stage_rewards, ...graders } = ctx.config.graders;
  const grade = await gradeGroup(
    trajectories.map((t) => t.episode),
    {
      truth: c.truth,
      questionId: c.id,
      podToService: (pod) => ctx.dataset.topology.serviceOfPod(pod),
      faultType: ctx.dataset.faults.find((f) => f.id === c.fault_id)?.type,
      d_max: ctx.config.episode.d_max,
      settings: graders,
      diversity: ctx.diversity,
      groupId,
    },
    stage_rewards[stage],
  );
  const adv = ctx.config.grpo.advantage;
  const estimated = rewardOrder ? permuted(grade.totals, rewardOrder) : grade.totals;
  return {
    groupId,
    caseId: c.id,
    trajectories,
    grade,
    advantages: computeAdvantages(estimated, adv),
    // A permutation is all-equal exactly when the rewards are, so the true totals decide.
    kept: keepGroup(grade.totals, adv),
    zeroVariance: allEqual(grade.totals, adv.equal_tolerance),
    ...(rewardOrder && { rewardOrder: [...rewardOrder] }),
  };
}

/** rewards[order[i]] for each i, after checking that order is a permutation of the group's samples. */
function permuted(rewards: readonly number[], order: readonly number[]): number[] {
  const isPermutation = order.length === rewards.length && [...order].sort((a, b) => a - b).every((v, i) => v === i);
  if (!isPermutation) throw new Error(`grading: reward order [${order.join(', ')}] is not a permutation of ${rewards.length} samples`);
  return order.map((i) => rewards[i]);
}
