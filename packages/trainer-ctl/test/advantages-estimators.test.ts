/** Each estimator against values computed by hand (see the comment above each literal). */
import { describe, expect, it } from 'vitest';
import {
  ADVANTAGE_ESTIMATOR_NAMES,
  AdvantageSettingsSchema,
  allEqual,
  computeAdvantages,
  keepGroup,
  type AdvantageSettings,
} from '../src/algo/core/advantages';

const settings = (over: Partial<AdvantageSettings>): AdvantageSettings => AdvantageSettingsSchema.parse(over);

function expectClose(actual: number[], expected: number[], digits = 9): void {
  expect(actual).toHaveLength(expected.length);
  actual.forEach((a, i) => expect(a).toBeCloseTo(expected[i], digits));
}

describe('grpo estimator', () => {
  it('scales by the sample std by default', () => {
    // mean 0.5, sample var (4 * 0.25) / 3 = 1/3, std 0.5773503; 0.5 / (0.5773503 + 1e-4) = 0.8658754
    expectClose(computeAdvantages([1, 0, 0, 1], settings({})), [0.8658754297607, -0.8658754297607, -0.8658754297607, 0.8658754297607]);
  });
  it('scales by the population std when asked', () => {
    // population std 0.5; 0.5 / (0.5 + 1e-4) = 0.99980004
    const a = computeAdvantages([1, 0, 0, 1], settings({ std: 'population' }));
    expectClose(a, [0.999800039992, -0.999800039992, -0.999800039992, 0.999800039992]);
  });
  it('uses eps from the settings', () => {
    // rewards 2, 4: mean 3, sample std sqrt(2) = 1.4142136; 1 / (1.4142136 + 0.5) = 0.5224077
    expectClose(computeAdvantages([2, 4], settings({ eps: 0.5 })), [-0.5224077499274, 0.5224077499274]);
  });
});

describe('drgrpo estimator', () => {
  it('centres on the group mean without scaling', () => {
    // mean (1 + 2 + 3 + 6) / 4 = 3
    expectClose(computeAdvantages([1, 2, 3, 6], settings({ estimator: 'drgrpo' })), [-2, -1, 0, 3]);
  });
});

describe('rloo estimator', () => {
  it('subtracts the mean of the other samples', () => {
    // sum 12: 1 - 11/3, 2 - 10/3, 3 - 9/3, 6 - 6/3
    expectClose(computeAdvantages([1, 2, 3, 6], settings({ estimator: 'rloo' })), [-8 / 3, -4 / 3, 0, 4]);
  });
});

describe('thinkfl estimator (ThinkFL Eq. 2-3 as written)', () => {
  it('gives the softmax weights w_i = exp(beta r_i) / sum_j exp(beta r_j), no baseline', () => {
    // beta 1: w = (1, e) / (1 + e) = (0.2689414, 0.7310586)
    expectClose(computeAdvantages([0, 1], settings({ estimator: 'thinkfl' })), [0.26894142137, 0.73105857863]);
    // w = (1, 1, e) / (2 + e) = (0.2119416, 0.2119416, 0.5761169); all positive, they sum to 1
    expectClose(computeAdvantages([0, 0, 1], settings({ estimator: 'thinkfl' })), [0.2119415576171, 0.2119415576171, 0.5761168847658]);
  });
  it('sharpens with a larger inverse temperature beta', () => {
    // beta 2: w = (1, e^2) / (1 + e^2) = (0.1192029, 0.8807971)
    expectClose(computeAdvantages([0, 1], settings({ estimator: 'thinkfl', softmax_beta: 2 })), [0.1192029220221, 0.8807970779779]);
  });
  it('gives 1/G to each sample of a group with equal rewards, and 1 to a group of one', () => {
    expectClose(computeAdvantages([0.4, 0.4, 0.4, 0.4], settings({ estimator: 'thinkfl' })), [0.25, 0.25, 0.25, 0.25], 12);
    expectClose(computeAdvantages([0.7], settings({ estimator: 'thinkfl' })), [1], 12);
  });
  it('stays finite for large rewards', () => {
    expectClose(computeAdvantages([1000, 0], settings({ estimator: 'thinkfl' })), [1, 0]);
  });
});

describe("softmax_centred estimator (this project's G*w_i - 1)", () => {
  it('centres the ThinkFL weights: G*w_i - 1', () => {
    // 2 * (0.2689414, 0.7310586) - 1
    expectClose(computeAdvantages([0, 1], settings({ estimator: 'softmax_centred' })), [-0.46211715726, 0.46211715726]);
    // 3 * (1, 1, e) / (2 + e) - 1
    expectClose(
      computeAdvantages([0, 0, 1], settings({ estimator: 'softmax_centred' })),
      [-0.3641753271487, -0.3641753271487, 0.7283506542975],
    );
  });
  it('sharpens with beta', () => {
    // beta 2: 2w - 1 = tanh(1) = 0.7615942
    expectClose(
      computeAdvantages([0, 1], settings({ estimator: 'softmax_centred', softmax_beta: 2 })),
      [-0.7615941559558, 0.7615941559558],
    );
  });
  it('stays finite for large rewards', () => {
    expectClose(computeAdvantages([1000, 0], settings({ estimator: 'softmax_centred' })), [1, -1]);
  });
});

const BASELINE_ESTIMATORS = ADVANTAGE_ESTIMATOR_NAMES.filter((e) => e !== 'thinkfl');

describe('degenerate groups', () => {
  it.each(BASELINE_ESTIMATORS)('%s gives 0 to a group of one', (estimator) => {
    expectClose(computeAdvantages([0.7], settings({ estimator })), [0], 12);
  });
  it.each(BASELINE_ESTIMATORS)('%s gives 0 to every sample when all rewards are equal', (estimator) => {
    expectClose(computeAdvantages([0.4, 0.4, 0.4], settings({ estimator })), [0, 0, 0], 12);
  });
  it('detects all-equal rewards within the tolerance', () => {
    expect(allEqual([0.1 + 0.2, 0.3, 0.3], 0)).toBe(false);
    expect(allEqual([0.1 + 0.2, 0.3, 0.3], 1e-9)).toBe(true);
    expect(allEqual([0.3, 0.31], 1e-9)).toBe(false);
    expect(allEqual([5], 0)).toBe(true);
  });
  it('keeps a group unless skipping is on and its rewards are all equal', () => {
    expect(keepGroup([1, 1, 1], settings({}))).toBe(false);
    expect(keepGroup([1, 1, 1], settings({ skip_equal_groups: false }))).toBe(true);
    expect(keepGroup([1, 0, 1], settings({}))).toBe(true);
    expect(keepGroup([1], settings({}))).toBe(false);
  });
  it('rejects an empty group and non-finite rewards', () => {
    expect(() => computeAdvantages([], settings({}))).toThrow(/at least one reward/);
    expect(() => computeAdvantages([1, Number.NaN], settings({}))).toThrow(/reward 1 of the group is NaN/);
    expect(() => keepGroup([Number.POSITIVE_INFINITY], settings({}))).toThrow(/Infinity/);
  });
});
