/**
 * Group-relative advantages: one function per estimator, chosen by name in the run config
 * (grpo.advantage.estimator). Every estimator maps the rewards of one group (the G samples of
 * one case, in sample order) to one advantage per sample, the weight of that sample's
 * log-likelihood in the policy loss. The baseline estimators (grpo, drgrpo, rloo,
 * softmax_centred) give 0 to every sample of a group whose rewards are all equal, so such a
 * group carries no gradient signal; thinkfl has no baseline and gives each such sample 1/G.
 */
import { z } from 'zod';

export const ADVANTAGE_ESTIMATOR_NAMES = ['grpo', 'drgrpo', 'rloo', 'thinkfl', 'softmax_centred'] as const;
export type AdvantageEstimatorName = (typeof ADVANTAGE_ESTIMATOR_NAMES)[number];

export const AdvantageSettingsSchema = z
  .strictObject({
    estimator: z
      .enum(ADVANTAGE_ESTIMATOR_NAMES)
      .default('grpo')
      .describe(
        "How a group's rewards become advantages. grpo: (r_i - mean)/(std + eps) (DeepSeekMath GRPO, outcome " +
          'supervision). drgrpo: r_i - mean, no std scaling (Dr.GRPO, Liu et al. 2025). rloo: r_i minus the mean ' +
          'of the other G-1 rewards (Ahmadian et al. 2024). thinkfl: w_i = exp(beta r_i) / sum_j exp(beta r_j), ' +
          'the softmax weights that multiply log pi(a_i|x) in ThinkFL Eq. 2-3 (beta = softmax_beta; no baseline, ' +
          'every w_i > 0, equal rewards give 1/G each). softmax_centred: G*w_i - 1, the same weights centred so ' +
          "that they sum to 0; this project's variant, not from the paper. Default grpo.",
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
      .describe("eps added to the std in grpo's (r_i - mean)/(std + eps); unit of the reward. Default 1e-4 (TRL)."),
    softmax_beta: z
      .number()
      .positive()
      .default(1)
      .describe(
        'beta of ThinkFL Eq. 3, an inverse temperature over rewards: w_i = exp(beta r_i) / sum_j exp(beta r_j), for ' +
          'the thinkfl and softmax_centred estimators; unit 1/reward. Higher sharpens the weights towards the best ' +
          'sample. The paper gives no value. Default 1.',
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
    shuffle_rewards: z
      .boolean()
      .default(false)
      .describe(
        "A control run, not a training method: each group's rewards are permuted before the estimator sees them " +
          '(a seeded order from run.seed and the group, i.e. stage, step and slot), so the update gets advantages ' +
          'with the same distribution but no link to what each sample did. A gain that the real reward gives and ' +
          'this control does not comes from the reward, not from the update alone (issue 26, acceptance 2). The ' +
          'metrics line keeps the true rewards and graders and says shuffled_rewards: true; skip_equal_groups acts ' +
          'on the true rewards, which a permutation leaves all-equal or not. Default false.',
      ),
  })
  .describe('Group-relative advantage estimation (trainer-ctl algo/core/advantages.ts).');

export type AdvantageSettings = z.output<typeof AdvantageSettingsSchema>;

/** An estimator, and whether it has a baseline (then a group of equal rewards gets exact zeros). */
interface Estimator {
  baseline: boolean;
  of(rewards: readonly number[], s: AdvantageSettings): number[];
}

function mean(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0) / xs.length;
}

function std(xs: readonly number[], kind: AdvantageSettings['std']): number {
  const n = kind === 'sample' ? xs.length - 1 : xs.length;
  if (n <= 0) return 0;
  const m = mean(xs);
  return Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / n);
}

/** ThinkFL Eq. 3: w_i = exp(beta r_i) / sum_j exp(beta r_j), computed stably (shifted by the max). */
function softmaxWeights(r: readonly number[], beta: number): number[] {
  const z = r.map((x) => beta * x);
  const top = Math.max(...z);
  const e = z.map((x) => Math.exp(x - top));
  const total = e.reduce((a, b) => a + b, 0);
  return e.map((x) => x / total);
}

const ESTIMATORS: Record<AdvantageEstimatorName, Estimator> = {
  grpo: {
    baseline: true,
    of(r, s) {
      const m = mean(r);
      const sd = std(r, s.std);
      return r.map((x) => (x - m) / (sd + s.eps));
    },
  },
  drgrpo: {
    baseline: true,
    of(r) {
      const m = mean(r);
      return r.map((x) => x - m);
    },
  },
  rloo: {
    baseline: true,
    of(r) {
      const sum = r.reduce((a, b) => a + b, 0);
      return r.map((x) => x - (sum - x) / (r.length - 1));
    },
  },
  /** ThinkFL Eq. 2-3 as written: the softmax weight w_i itself multiplies log pi(a_i|x). */
  thinkfl: {
    baseline: false,
    of: (r, s) => softmaxWeights(r, s.softmax_beta),
  },
  /**
   * This project's variant, not the paper's: G*w_i - 1. The centring makes the advantages sum
   * to zero (a sample with the group's share 1/G gets 0) and for small beta
   * A_i ~ beta (r_i - mean), i.e. Dr.GRPO scaled by beta.
   */
  softmax_centred: {
    baseline: true,
    of: (r, s) => softmaxWeights(r, s.softmax_beta).map((w) => r.length * w - 1),
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
  const estimator = ESTIMATORS[settings.estimator];
  // Exact zeros for identical rewards: the float mean of equal values can differ from them by
  // an ulp, which grpo's division by a near-zero std would blow up to a visible advantage.
  if (estimator.baseline && allEqual(rewards, 0)) return rewards.map(() => 0);
  return estimator.of(rewards, settings);
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
