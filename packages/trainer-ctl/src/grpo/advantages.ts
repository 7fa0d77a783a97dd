/**
 * Group-relative advantages: one function per estimator, chosen by name in the run config
 * (grpo.advantage.estimator). Every estimator maps the rewards of one group (the G samples of
 * one case, in sample order) to one advantage per sample; all of them give 0 to every sample
 * of a group whose rewards are all equal, so such a group carries no gradient signal.
 */
import { z } from 'zod';

export const ADVANTAGE_ESTIMATOR_NAMES = ['grpo', 'drgrpo', 'rloo', 'thinkfl'] as const;
export type AdvantageEstimatorName = (typeof ADVANTAGE_ESTIMATOR_NAMES)[number];

export const AdvantageSettingsSchema = z
  .strictObject({
    estimator: z
      .enum(ADVANTAGE_ESTIMATOR_NAMES)
      .default('grpo')
      .describe(
        'How a group\'s rewards become advantages. grpo: (r_i - mean)/(std + eps) (DeepSeekMath GRPO, outcome ' +
          'supervision). drgrpo: r_i - mean, no std scaling (Dr.GRPO, Liu et al. 2025). rloo: r_i minus the mean ' +
          'of the other G-1 rewards (Ahmadian et al. 2024). thinkfl: softmax weights over the group with ' +
          'temperature softmax_temperature, centred: G*w_i - 1 (ThinkFL Eq. 3 as implemented here, see ' +
          'grpo/advantages.ts). Default grpo.',
      ),
    std: z
      .enum(['sample', 'population'])
      .default('sample')
      .describe(
        'Standard deviation of the grpo estimator: sample (divides by G-1, as torch.std in TRL and verl) or ' +
          'population (divides by G). A group of one has std 0. Default sample.',
      ),
    eps: z
      .number()
      .positive()
      .default(1e-4)
      .describe('eps added to the std in grpo\'s (r_i - mean)/(std + eps); unit of the reward. Default 1e-4 (TRL).'),
    softmax_temperature: z
      .number()
      .positive()
      .default(1)
      .describe(
        'Temperature tau of the thinkfl estimator, w_i = exp(r_i/tau) / sum_j exp(r_j/tau); unit of the reward. ' +
          'Lower sharpens the weights towards the best sample. Default 1.',
      ),
    skip_equal_groups: z
      .boolean()
      .default(true)
      .describe(
        'Leave out of the train batch a group whose rewards are all equal (within equal_tolerance): every ' +
          'estimator gives it zero advantages, so it only dilutes the batch (DAPO dynamic sampling). Default true.',
      ),
    equal_tolerance: z
      .number()
      .min(0)
      .default(1e-9)
      .describe('Rewards closer than this count as equal for skip_equal_groups; unit of the reward. Default 1e-9.'),
  })
  .describe('Group-relative advantage estimation (trainer-ctl grpo/advantages.ts).');

export type AdvantageSettings = z.output<typeof AdvantageSettingsSchema>;

type Estimator = (rewards: readonly number[], s: AdvantageSettings) => number[];

function mean(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0) / xs.length;
}

function std(xs: readonly number[], kind: AdvantageSettings['std']): number {
  const n = kind === 'sample' ? xs.length - 1 : xs.length;
  if (n <= 0) return 0;
  const m = mean(xs);
  return Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / n);
}

const ESTIMATORS: Record<AdvantageEstimatorName, Estimator> = {
  grpo(r, s) {
    const m = mean(r);
    const sd = std(r, s.std);
    return r.map((x) => (x - m) / (sd + s.eps));
  },
  drgrpo(r) {
    const m = mean(r);
    return r.map((x) => x - m);
  },
  rloo(r) {
    const sum = r.reduce((a, b) => a + b, 0);
    return r.map((x) => x - (sum - x) / (r.length - 1));
  },
  /**
   * The ThinkFL paper's Eq. 3 text could not be retrieved while writing this (offline), so this
   * is the softmax weighting the issue describes: w_i = softmax(r/tau)_i, centred and scaled by
   * the group size as A_i = G*w_i - 1. The centring makes the advantages sum to zero (a sample
   * with the group's share 1/G gets 0), equal rewards give 0, and for large tau
   * A_i ~ (r_i - mean)/tau, i.e. Dr.GRPO scaled by 1/tau.
   */
  thinkfl(r, s) {
    const z = r.map((x) => x / s.softmax_temperature);
    const top = Math.max(...z);
    const e = z.map((x) => Math.exp(x - top));
    const total = e.reduce((a, b) => a + b, 0);
    return e.map((x) => (r.length * x) / total - 1);
  },
};

function checkRewards(rewards: readonly number[]): void {
  if (rewards.length === 0) throw new Error('advantages: a group needs at least one reward');
  const bad = rewards.findIndex((r) => !Number.isFinite(r));
  if (bad >= 0) throw new Error(`advantages: reward ${bad} of the group is ${rewards[bad]}, not a finite number`);
}

/** Advantages of one group's rewards (in sample order) under the configured estimator. */
export function computeAdvantages(rewards: readonly number[], settings: AdvantageSettings): number[] {
  checkRewards(rewards);
  // Exact zeros for identical rewards: the float mean of equal values can differ from them by
  // an ulp, which grpo's division by a near-zero std would blow up to a visible advantage.
  if (allEqual(rewards, 0)) return rewards.map(() => 0);
  return ESTIMATORS[settings.estimator](rewards, settings);
}

/** True when all rewards lie within `tolerance` of each other (a group of one always does). */
export function allEqual(rewards: readonly number[], tolerance: number): boolean {
  checkRewards(rewards);
  return Math.max(...rewards) - Math.min(...rewards) <= tolerance;
}

/** Whether a group goes into the train batch: false only when skipping is on and its rewards are all equal. */
export function keepGroup(rewards: readonly number[], settings: AdvantageSettings): boolean {
  return !(settings.skip_equal_groups && allEqual(rewards, settings.equal_tolerance));
}
