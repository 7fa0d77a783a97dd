/** A train job as the engine's request: sft_step or grpo_step arguments, checked first. */
import type { RunConfig } from '../config/schema';
import type { GrpoStepArgs, SftStepArgs, StepResult } from '../engine/protocol';
import type { TrainJob } from '../queue/jobs';

export type EngineStep = { op: 'sft_step'; args: SftStepArgs[] } | { op: 'grpo_step'; args: GrpoStepArgs };

/** Samples of a job, inline or in its token-batch file. */
const sampleCount = (job: TrainJob) => job.batch?.rows ?? job.samples.length;

/** The job's SFT optimizer steps: consecutive slices of its samples (sft_steps), or one step over all. */
function sftSteps(job: TrainJob, base: SftStepArgs, where: string): SftStepArgs[] {
  if (!job.sft_steps) return [base];
  const total = job.sft_steps.reduce((a, s) => a + s.size, 0);
  if (total !== sampleCount(job) || job.sft_steps.some((s) => !Number.isInteger(s.size) || s.size < 1)) {
    throw new Error(`${where}: sft_steps cover ${total} samples in steps of positive sizes; the job has ${sampleCount(job)}`);
  }
  let from = 0;
  return job.sft_steps.map((s) => {
    const to = from + s.size;
    const rows = base.batch
      ? { batch: { ...base.batch, row_range: [from, to] as [number, number] } }
      : { input_ids: base.input_ids!.slice(from, to), mask: base.mask!.slice(from, to) };
    from = to;
    return { ...base, ...rows, lr: s.lr };
  });
}

function microBatches(config: RunConfig): Pick<SftStepArgs, 'micro_batch_size' | 'micro_batch_tokens'> {
  const { micro_batch_size, micro_batch_tokens } = config.workers.train;
  return micro_batch_tokens === null ? { micro_batch_size } : { micro_batch_size, micro_batch_tokens };
}

/** A job whose samples are in a token-batch file: the engine reads the file (the writer checked the rows). */
function fileStep(job: TrainJob, config: RunConfig, where: string): EngineStep {
  const b = job.batch!;
  if (job.samples.length > 0) throw new Error(`${where}: samples both inline and in ${b.path}`);
  const base: SftStepArgs = { batch: { path: b.path, bytes: b.bytes, sha256: b.sha256 }, ...microBatches(config) };
  if (job.kind === 'sft') return { op: 'sft_step', args: sftSteps(job, base, where) };
  if (job.sft_steps) throw new Error(`${where}: sft_steps is for sft jobs only`);
  if (!b.advantages) throw new Error(`${where}: ${b.path} has no advantages (required for grpo)`);
  const given = job.temperatures ?? [];
  const temps = given.length === 1 ? Array<number>(b.rows).fill(given[0]) : given;
  if (temps.length !== b.rows) throw new Error(`${where}: ${given.length} sampling temperatures for ${b.rows} rows of ${b.path}`);
  const cold = temps.findIndex((t) => !(t > 0));
  if (cold >= 0)
    throw new Error(`${where}: row ${cold} has sampling temperature ${temps[cold]}; grpo needs the temperature > 0 it was sampled at`);
  return {
    op: 'grpo_step',
    args: { ...base, lr: config.grpo.optimizer.lr, loss: config.grpo.loss, temperature: temps },
  };
}

/** Throws, naming the sample, on a malformed job (ragged arrays, missing advantages). */
export function engineStep(job: TrainJob, config: RunConfig): EngineStep {
  const where = `train job update ${job.update}`;
  if (job.kind === 'checkpoint') throw new Error(`${where}: a checkpoint job makes no engine step`);
  if (job.batch) return fileStep(job, config, where);
  if (job.samples.length === 0) throw new Error(`${where}: no samples`);
  job.samples.forEach((s, i) => {
    if (s.mask.length !== s.ids.length)
      throw new Error(`${where}: samples[${i}]: mask has ${s.mask.length} entries for ${s.ids.length} ids`);
    if (s.old_logprobs && s.old_logprobs.length !== s.ids.length) {
      throw new Error(`${where}: samples[${i}]: old_logprobs has ${s.old_logprobs.length} entries for ${s.ids.length} ids`);
    }
    // A non-finite number becomes null in the job's JSON: name it instead of sending null to the engine.
    const bad = s.old_logprobs?.findIndex((x) => typeof x !== 'number' || !Number.isFinite(x)) ?? -1;
    if (bad >= 0) throw new Error(`${where}: samples[${i}]: old_logprobs[${bad}] is ${s.old_logprobs![bad]}, not a finite log-probability`);
  });
  const base: SftStepArgs = {
    input_ids: job.samples.map((s) => s.ids),
    mask: job.samples.map((s) => s.mask),
    ...microBatches(config),
  };
  if (job.kind === 'sft') return { op: 'sft_step', args: sftSteps(job, base, where) };
  if (job.sft_steps) throw new Error(`${where}: sft_steps is for sft jobs only`);
  const missing = job.samples.findIndex((s) => s.advantage === undefined);
  if (missing >= 0) throw new Error(`${where}: samples[${missing}] has no advantage (required for grpo)`);
  const cold = job.samples.findIndex((s) => s.temperature === undefined || !(s.temperature > 0));
  if (cold >= 0) {
    throw new Error(
      `${where}: samples[${cold}] has sampling temperature ${job.samples[cold].temperature}; grpo needs the temperature > 0 it was sampled at`,
    );
  }
  const withOld = job.samples.filter((s) => s.old_logprobs).length;
  if (withOld !== 0 && withOld !== job.samples.length) {
    throw new Error(`${where}: ${withOld} of ${job.samples.length} samples carry old_logprobs; give all or none`);
  }
  return {
    op: 'grpo_step',
    args: {
      ...base,
      // Explicit: the engine keeps the last lr it was given, and SFT steps set their own.
      lr: config.grpo.optimizer.lr,
      advantages: job.samples.map((s) => s.advantage as number),
      ...(withOld > 0 && { old: job.samples.map((s) => s.old_logprobs as number[]) }),
      loss: config.grpo.loss,
      temperature: job.samples.map((s) => s.temperature as number),
    },
  };
}

/** Several SFT steps' results as one: token counts add up, other figures are averaged over the steps. */
export function mergeSteps(results: readonly StepResult[]): StepResult {
  if (results.length === 1) return results[0];
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const norms = results.map((r) => r.grad_norm).filter((g): g is number => g !== null);
  return {
    loss: mean(results.map((r) => r.loss)),
    grad_norm: norms.length ? mean(norms) : null,
    tokens: results.reduce((a, r) => a + r.tokens, 0),
    step: results[results.length - 1].step,
  };
}

/** The finite numbers of an engine step's result, as TrainResult metrics. */
export function stepMetrics(result: StepResult): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(result)) if (typeof v === 'number' && Number.isFinite(v)) out[k] = v;
  return out;
}
