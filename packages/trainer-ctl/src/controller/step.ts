/**
 * One GRPO step: play the step's cases (G samples each, made as grpo.groups says) through the
 * rollout queue, grade each group once it is complete, compute advantages, leave out
 * zero-variance groups and refill from the stage's next cases (bounded), then submit one train
 * job and wait for its result.
 */
import type { Case } from '@thinkfl/env';
import type { StageName } from '../config/index';
import { groupKind, type PlayGroup, type PlayedGroup } from '../algo/groups/index';
import type { RolloutJob, TrainJob, TrainResult, TrainSample } from '../queue/jobs';
import { gradeTrajectories, type GradedGroup, type GradingContext } from '../algo/grading';
import { hash32, shuffled } from './random';
import { stepCases } from './schedule';
import { stepRecord, type StepRecord, type StepTimings } from './step-metrics';
import type { ControlTransport } from './transport';

export interface StepContext extends GradingContext {
  runId: string;
  train: Case[];
  transport: ControlTransport;
}

export interface StepInput {
  stage: StageName;
  /** 0-based step within the stage. */
  step: number;
  /** Update index the step's train job gets. */
  update: number;
  policyVersion: number;
  checkpoint: boolean;
}

export interface StepOutcome {
  record: StepRecord;
  /** Every graded group of the step, refills included, in slot order. */
  groups: GradedGroup[];
  /** Absent when every group (refills included) had equal rewards: no update was made. */
  result?: TrainResult;
  /** Every group the step played (its groups' and their helpers', such as branch anchors): dropped once it is recorded. */
  groupIds: string[];
}

export function groupIdOf(stage: string, step: number, slot: number): string {
  return `${stage}-${step}-${slot}`;
}

function rolloutJobs(ctx: StepContext, input: StepInput, slot: number, c: Case, temperature: number): RolloutJob[] {
  const g = ctx.config.grpo.group_size;
  const groupId = groupIdOf(input.stage, input.step, slot);
  return Array.from({ length: g }, (_, i) => ({
    run_id: ctx.runId,
    stage: input.stage,
    step: input.step,
    group_id: groupId,
    case_id: c.id,
    sample_index: i,
    policy_version: input.policyVersion,
    temperature,
    seed: hash32(`${ctx.config.run.seed}:${groupId}:${i}`),
  }));
}

/**
 * grpo.advantage.shuffle_rewards: the seeded order in which a group's rewards reach the estimator
 * (the group id names stage, step and slot, so a replayed step shuffles the same way).
 */
function rewardOrder(ctx: StepContext, groupId: string, size: number): number[] | undefined {
  if (!ctx.config.grpo.advantage.shuffle_rewards) return undefined;
  const samples = Array.from({ length: size }, (_, i) => i);
  return shuffled(samples, `${ctx.config.run.seed}:shuffle-rewards:${groupId}`);
}

/** A kept group's samples as train rows, in sample order. */
const trainRows = (g: GradedGroup): TrainSample[] =>
  g.trajectories.map((t, i) => ({
    ids: t.ids,
    mask: t.mask,
    advantage: g.advantages[i],
    old_logprobs: t.logprobs,
    temperature: t.temperature,
  }));

function groupTimeoutMs(ctx: StepContext): number {
  // A job may be retried after its own timeout; allow a few attempts before calling the step stuck.
  return 3 * ctx.config.workers.rollout.job_timeout_s * 1000;
}

/** Grades one played group (with its branch turn) and, when it is kept, stages its rows for the step's update. */
async function gradeGroup(
  ctx: StepContext,
  input: StepInput,
  groupId: string,
  c: Case,
  played: PlayedGroup,
  stagedRows: number,
): Promise<GradedGroup> {
  const order = rewardOrder(ctx, groupId, played.trajectories.length);
  const group = {
    ...(await gradeTrajectories(ctx, input.stage, groupId, c, played.trajectories, order)),
    ...(played.branchTurn !== undefined && { branchTurn: played.branchTurn }),
  };
  if (group.kept) ctx.transport.stageTrainRows?.(input.update, trainRows(group), stagedRows);
  return group;
}

export async function runGrpoStep(ctx: StepContext, input: StepInput): Promise<StepOutcome> {
  const t0 = Date.now();
  const { config, transport } = ctx;
  const want = config.grpo.cases_per_step;
  const temperature = config.generation.temperature[input.stage];
  const { primary, refill } = stepCases(input.stage, input.step, ctx.train, config);
  const timings: StepTimings = { enqueue_ms: 0, rollout_ms: 0, grade_ms: 0, update_ms: 0, step_ms: 0 };
  const groups: GradedGroup[] = [];
  const groupIds: string[] = [];
  const kind = groupKind(config.grpo.groups.kind);
  const play: PlayGroup = async (jobs) => {
    const tq = Date.now();
    await transport.enqueueRollouts(jobs);
    timings.enqueue_ms += Date.now() - tq;
    return transport.waitGroup(jobs[0].group_id, jobs.length, groupTimeoutMs(ctx));
  };
  let batch = primary.map((c, slot) => ({ slot, c }));
  let nextRefill = 0;
  while (batch.length > 0) {
    const tw = Date.now();
    // Each group is graded as soon as it and every earlier slot are: the same order as grading
    // after the last group (the diversity cache sees the same sequence), but off the critical path.
    let grade_ms = 0;
    let previous: Promise<unknown> = Promise.resolve();
    const graded = batch.map(({ slot, c }) => {
      const groupId = groupIdOf(input.stage, input.step, slot);
      const arrived = kind.play(rolloutJobs(ctx, input, slot, c, temperature), config.grpo.groups, play);
      const done = Promise.all([arrived, previous]).then(async ([played]) => {
        const tg = Date.now();
        groupIds.push(groupId, ...played.helperGroupIds);
        const group = await gradeGroup(ctx, input, groupId, c, played, want + refill.length);
        grade_ms += Date.now() - tg;
        return group;
      });
      previous = done;
      return done;
    });
    groups.push(...(await Promise.all(graded)));
    timings.rollout_ms += Date.now() - tw - grade_ms;
    timings.grade_ms += grade_ms;
    const missing = want - groups.filter((g) => g.kept).length;
    const take = Math.min(missing, refill.length - nextRefill);
    batch = Array.from({ length: Math.max(0, take) }, (_, i) => ({ slot: want + nextRefill + i, c: refill[nextRefill + i] }));
    nextRefill += batch.length;
  }

  const samples: TrainSample[] = groups.filter((g) => g.kept).flatMap(trainRows);
  let result: TrainResult | undefined;
  if (samples.length > 0) {
    const job: TrainJob = {
      run_id: ctx.runId,
      stage: input.stage,
      update: input.update,
      kind: 'grpo',
      samples,
      checkpoint: input.checkpoint,
    };
    const tu = Date.now();
    result = await transport.train(job, config.workers.train.job_timeout_s * 1000);
    timings.update_ms = Date.now() - tu;
  }
  timings.step_ms = Date.now() - t0;
  const record = stepRecord({
    stage: input.stage,
    step: input.step,
    update: result ? input.update : null,
    policyVersion: input.policyVersion,
    groups,
    result,
    timings,
  });
  return { record, groups, result, groupIds };
}
