/**
 * run.expect checks on hand-made series with hand-computed verdicts (reductions, trends with an
 * odd middle value, NaN, a missing series), the config's validation of an expectation, and the
 * JUnit XML parsed back by an independent JUnit parser (junit2json).
 */
import { parse } from 'junit2json';
import { describe, expect, it } from 'vitest';
import { checkExpectation, currentExpectations, describeExpectation } from '../src/ci/expectations';
import { junitXml } from '../src/ci/junit';
import { ExpectationSchema } from '../src/config/sections/expect';
import { parseRunConfig } from '../src/config/index';

const series = (ys: number[]) => ys.map((y, i) => ({ x: i + 1, y }));
const runs = new Map([
  ['priming/reward/mean', series([0.1, 0.3, 0.2, 0.4, 0.5])],
  ['sft/train/loss', series([2, Number.NaN, 0.5])],
  ['eval/priming/format_valid', series([0.5])],
]);
const check = (e: Record<string, unknown>) => checkExpectation(ExpectationSchema.parse(e), runs);

describe('run.expect checks', () => {
  it('reduces the series then applies min and max', () => {
    expect(check({ metric: 'priming/reward/mean', min: 0.5 })).toMatchObject({ ok: true, detail: 'last 0.5' });
    expect(check({ metric: 'priming/reward/mean', of: 'first', min: 0.2 })).toMatchObject({
      ok: false,
      detail: 'first 0.1 is below the minimum 0.2',
    });
    // mean of 0.1 0.3 0.2 0.4 0.5 = 0.3
    expect(check({ metric: 'priming/reward/mean', of: 'mean', max: 0.29 })).toMatchObject({
      ok: false,
      detail: 'mean 0.3 is above the maximum 0.29',
    });
    expect(check({ metric: 'priming/reward/mean', of: 'max', min: 0.5, max: 0.5 }).ok).toBe(true);
    expect(check({ metric: 'eval/priming/format_valid', min: 0.75, name: 'format validity after stage 1' })).toEqual({
      name: 'format validity after stage 1',
      ok: false,
      detail: 'last 0.5 is below the minimum 0.75',
    });
  });

  it('compares the halves of the series for a trend, leaving an odd middle value out', () => {
    // first half 0.1 0.3 (mean 0.2), second half 0.4 0.5 (mean 0.45); 0.2 is the middle.
    expect(check({ metric: 'priming/reward/mean', trend: 'rising' })).toMatchObject({
      ok: true,
      detail: 'first-half mean 0.2, second-half mean 0.45',
    });
    expect(check({ metric: 'priming/reward/mean', trend: 'falling' })).toMatchObject({
      ok: false,
      detail: 'not falling: second-half mean 0.45 against first-half mean 0.2',
    });
    expect(check({ metric: 'eval/priming/format_valid', trend: 'rising' })).toMatchObject({
      ok: false,
      detail: 'a trend needs 2 or more values, the run wrote 1',
    });
  });

  it('catches a NaN: finite, and min/max never pass on NaN', () => {
    expect(check({ metric: 'sft/train/loss', finite: true })).toMatchObject({ ok: false, detail: '1 of 3 values are not finite' });
    expect(check({ metric: 'sft/train/loss', of: 'max', max: 10 })).toMatchObject({ ok: false, detail: 'max NaN is above the maximum 10' });
    expect(check({ metric: 'priming/reward/mean', finite: true })).toMatchObject({ ok: true, detail: '5 of 5 values finite' });
  });

  it('reads an old camelCase metric name as its snake_case one, with a warning naming the new one', () => {
    const old = ['eval/priming/formatValid', 'eval/refinement/perFaultVote/service/R@1', 'priming/reward/mean'];
    const { expectations, warnings } = currentExpectations(old.map((metric) => ExpectationSchema.parse({ metric, min: 0 })));
    expect(expectations.map((e) => e.metric)).toEqual([
      'eval/priming/format_valid',
      'eval/refinement/per_fault_vote/service/R@1',
      'priming/reward/mean',
    ]);
    expect(warnings).toEqual([
      'run.expect: metric eval/priming/formatValid is now named eval/priming/format_valid; write eval/priming/format_valid',
      'run.expect: metric eval/refinement/perFaultVote/service/R@1 is now named eval/refinement/per_fault_vote/service/R@1; write eval/refinement/per_fault_vote/service/R@1',
    ]);
    expect(checkExpectation(expectations[0], runs)).toEqual({ name: 'eval/priming/format_valid last >= 0', ok: true, detail: 'last 0.5' });
  });

  it('fails an expectation on a series the run never wrote, naming it', () => {
    expect(check({ metric: 'refinement/train/loss', finite: true })).toEqual({
      name: 'refinement/train/loss finite',
      ok: false,
      detail: 'the run wrote no values of refinement/train/loss',
    });
    expect(describeExpectation(ExpectationSchema.parse({ metric: 'm', of: 'mean', min: 1, max: 2, trend: 'rising' }))).toBe(
      'm mean >= 1, mean <= 2, rising',
    );
  });

  it('refuses an expectation that checks nothing, naming its YAML path and line', () => {
    const yaml = `run:
  name: x
  expect:
    - { metric: sft/train/loss, finite: true }
    - { metric: sft/train/loss }
model: { dir: /m }
dataset: { path: /d }
`;
    expect(() => parseRunConfig(yaml, 'run.yaml', { checkPaths: false })).toThrow(
      /run\.yaml:5.*run\.expect\.1.*at least one of min, max, trend or finite/s,
    );
  });
});

describe('junit.xml', () => {
  it('parses back with a JUnit parser: one testcase per expectation, failures with their message', async () => {
    const xml = junitXml('ci-smoke', [
      { name: 'SFT loss falls', ok: true, detail: 'first-half mean 2.66, second-half mean 0.40' },
      { name: 'format validity <after> stage 1 & "more"', ok: false, detail: 'last 0 is below the minimum 0.75' },
    ]);
    const report = (await parse(xml)) as {
      tests: number;
      failures: number;
      testsuite: { name: string; testcase: { name: string; failure?: { message: string }[] }[] }[];
    };
    expect(report.tests).toBe(2);
    expect(report.failures).toBe(1);
    const [suite] = report.testsuite;
    expect(suite.name).toBe('run.expect ci-smoke');
    expect(suite.testcase.map((t) => t.name)).toEqual(['SFT loss falls', 'format validity <after> stage 1 & "more"']);
    expect(suite.testcase[0].failure).toBeUndefined();
    expect(suite.testcase[1].failure?.[0].message).toBe('last 0 is below the minimum 0.75');
  });
});
