/**
 * The stage scheduler: stage 1 (SFT, its evaluation, GRPO steps), stage 2, stage 3, each
 * ending with a checkpoint of the policy it ends on and an evaluation on held-out cases. Every
 * boundary (SFT update, GRPO step, tracking point, stage end) appends its metrics line and then
 * writes state.json, so a killed run resumes from the last completed boundary with the same
 * number of updates as an unbroken one.
 */
import { basename } from 'node:path';
import type { Case, Dataset } from '@thinkfl/env';
import type { DiversityCache } from '@thinkfl/graders';
import { STAGE_NAMES, type RunConfig, type StageName } from '../config/index';
import type { TrainJob, TrainResult, TrainSample } from '../queue/jobs';
import { createProgress, type Progress, type ProgressStream } from '../progress';
import { pruneCheckpoints } from './checkpoints';
import { formatEvalReport, runEvaluation, type EvalReport } from './evaluation';
import { appendEpisodes, appendMetrics, type MetricsRecord } from '../run-files/metrics-log';
import { runSft } from './sft-phase';
import { currentStage, writeSnapshot, writeState, type RunState } from '../run-files/state';
import { runGrpoStep } from './step';
import { stepNote } from './step-metrics';
import type { ControlTransport } from './transport';
import { trackCases, trackDue, trackPoint } from './tracking';
import { evalScalars, metricScalars } from '../logs/scalars';
import { checkpointDir } from '../workers/run-files';

/** Where a run's scalars go besides metrics.jsonl (TensorBoard event files), by global step (metrics line count). */
export interface ScalarSink {
  scalars(step: number, values: Record<string, number>): void;
}

export interface StagesContext {
  config: RunConfig;
  runId: string;
  runDir: string;
  dataset: Dataset;
  train: Case[];
  eval: Case[];
  transport: ControlTransport;
  diversity?: DiversityCache;
  teacher: () => Promise<TrainSample[]>;
  /** Where progress lines go (default stderr). */
  stream?: ProgressStream;
  /** Where evaluation summaries go (default stdout). */
  print?: (text: string) => void;
  scalars?: ScalarSink;
}

function enabled(config: RunConfig, stage: StageName): boolean {
  return config.stages[stage].enabled;
}

/** Records one completed boundary: the metrics line first, then the state that counts it. */
function commit(ctx: StagesContext, state: RunState, record: MetricsRecord | undefined, result?: TrainResult): void {
  if (result) {
    state.updates = result.update + 1;
    state.policy_version = result.version;
    if (result.policy_dir) state.policy_dir = result.policy_dir;
    if (result.checkpoint_dir) state.checkpoint = result.checkpoint_dir;
    state.engine_checkpoint = result.engine_checkpoint;
  }
  if (record) {
    appendMetrics(ctx.runDir, record);
    state.metrics_lines++;
    ctx.scalars?.scalars(state.metrics_lines, metricScalars(record));
  }
  writeState(ctx.runDir, state);
  if (result?.checkpoint_dir) {
    writeSnapshot(ctx.runDir, state);
    pruneCheckpoints(ctx.runDir, state, ctx.config.checkpoints.keep_last);
  }
}

/**
 * Marks the checkpoint of the current policy as the one `name` ended with; retention keeps it.
 * When the newest checkpoint is older (the stage's last steps made no update, so the checkpoint
 * its last step asked for was never written), a checkpoint job writes one of the policy as it is.
 */
async function endWith(ctx: StagesContext, state: RunState, name: string): Promise<void> {
  const current = state.checkpoint !== undefined && basename(state.checkpoint) === basename(checkpointDir('', state.updates));
  if (!current && state.updates > 0) {
    const stage = STAGE_NAMES.find((s) => s === name) ?? 'priming';
    const job: TrainJob = { run_id: ctx.runId, stage, update: state.updates, kind: 'checkpoint', samples: [], checkpoint: true };
    commit(ctx, state, undefined, await ctx.transport.train(job, ctx.config.workers.train.job_timeout_s * 1000));
  }
  if (state.checkpoint) state.stage_checkpoints = { ...state.stage_checkpoints, [name]: state.checkpoint };
}

/** Plays the tracked training cases when the current policy is due (logging.track). */
async function track(ctx: StagesContext, state: RunState, stage: string): Promise<void> {
  const { every_updates } = ctx.config.logging.track;
  const cases = trackCases(ctx.train, ctx.config.logging.track.cases);
  if (!trackDue(state, every_updates, cases)) return;
  const record = await trackPoint({ ...ctx }, state, stage, cases);
  state.tracked = state.updates;
  commit(ctx, state, record);
}

async function evaluateAs(ctx: StagesContext, state: RunState, name: string): Promise<EvalReport> {
  const report = await runEvaluation({ ...ctx, cases: ctx.eval }, name, state.policy_version);
  (ctx.print ?? console.log)(formatEvalReport(report));
  ctx.scalars?.scalars(state.metrics_lines, evalScalars(report));
  return report;
}

async function primeWithSft(ctx: StagesContext, state: RunState): Promise<void> {
  let progress: Progress | undefined;
  // The total comes with the first update's record; the clock and the count start before it.
  const startedAt = Date.now();
  const resumedAt = state.sft.updates;
  await runSft(ctx, state.sft.updates, async ({ result, record }) => {
    state.sft.updates = result.update + 1;
    commit(ctx, state, record, result);
    progress ??= createProgress({
      total: Number(record.of),
      label: 'priming sft',
      stream: ctx.stream,
      everyPct: 0,
      startedAt,
      done: resumedAt,
    });
    const loss = typeof result.metrics.loss === 'number' ? `loss ${result.metrics.loss.toFixed(4)}` : '';
    progress.update(result.update + 1, loss);
    await track(ctx, state, 'sft');
  });
  progress?.finish();
  await endWith(ctx, state, 'sft');
  await track(ctx, state, 'sft');
  if (ctx.eval.length) await evaluateAs(ctx, state, 'sft');
  state.sft.done = true;
  commit(ctx, state, undefined);
}

async function runStage(ctx: StagesContext, state: RunState, stage: StageName): Promise<void> {
  const { config } = ctx;
  const steps = config.stages[stage].steps;
  // In a log (not a terminal) every step gets its own plain line.
  const progress = createProgress({ total: steps, label: stage, stream: ctx.stream, everyPct: 0, done: state.stages[stage].steps });
  for (let step = state.stages[stage].steps; step < steps; step++) {
    const last = step === steps - 1;
    const { record, groups, result, groupIds } = await runGrpoStep(ctx, {
      stage,
      step,
      update: state.updates,
      policyVersion: state.policy_version,
      checkpoint: last || (step + 1) % config.checkpoints.every_steps === 0,
    });
    const shown = groups.flatMap((g) =>
      g.trajectories.map((t, i) => ({ group_id: g.groupId, reward: g.grade.totals[i], episode: t.episode })),
    );
    appendEpisodes(ctx.runDir, { stage, step }, shown.slice(0, config.logging.episodes_per_step));
    state.stages[stage].steps = step + 1;
    commit(ctx, state, record, result);
    await ctx.transport.dropGroups(groupIds);
    progress.update(step + 1, stepNote(record));
    await track(ctx, state, stage);
  }
  progress.finish();
  await endWith(ctx, state, stage);
  await track(ctx, state, stage);
  if (ctx.eval.length) await evaluateAs(ctx, state, stage);
  state.stages[stage].done = true;
  commit(ctx, state, undefined);
}

/** Runs what `state` says is left of the run, in order; returns when every stage is done. */
export async function runStages(ctx: StagesContext, state: RunState): Promise<void> {
  // The policy the run starts (or resumes) from, when it is due and was not tracked yet.
  await track(ctx, state, currentStage(state, (s) => enabled(ctx.config, s)) ?? 'done');
  for (const stage of STAGE_NAMES) {
    if (!enabled(ctx.config, stage) || state.stages[stage].done) continue;
    if (stage === 'priming' && ctx.config.stages.priming.sft.enabled && !state.sft.done) await primeWithSft(ctx, state);
    await runStage(ctx, state, stage);
  }
  state.done = true;
  commit(ctx, state, undefined);
}
