/**
 * run.expect: each expectation reduces one scalar series of the finished run and checks it;
 * the verdicts are printed, written as JUnit XML beside metrics.jsonl, and any failure fails
 * the run (the CI gate of docs/ci.md).
 */
import type { Expectation } from '../config/sections/expect';
import { currentSeriesName } from '../logs/scalars';
import type { Point } from './series';

export interface Verdict {
  name: string;
  ok: boolean;
  /** What was measured and, for a failure, what was wanted. */
  detail: string;
}

const fmt = (x: number) => String(Number(x.toPrecision(4)));
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

function reduce(values: number[], of: Expectation['of']): number {
  if (of === 'first') return values[0];
  if (of === 'last') return values[values.length - 1];
  if (of === 'mean') return mean(values);
  // NaN wins: a diverged value must not hide behind Math.min/max of the rest.
  if (values.some(Number.isNaN)) return Number.NaN;
  return of === 'min' ? Math.min(...values) : Math.max(...values);
}

/** The check written out, the default name of an expectation. */
export function describeExpectation(e: Expectation): string {
  const parts: string[] = [];
  if (e.min !== undefined) parts.push(`${e.of} >= ${e.min}`);
  if (e.max !== undefined) parts.push(`${e.of} <= ${e.max}`);
  if (e.trend) parts.push(e.trend);
  if (e.finite) parts.push('finite');
  return `${e.metric} ${parts.join(', ')}`;
}

export function checkExpectation(e: Expectation, series: Map<string, Point[]>): Verdict {
  const name = e.name ?? describeExpectation(e);
  const values = (series.get(e.metric) ?? []).map((p) => p.y);
  if (!values.length) return { name, ok: false, detail: `the run wrote no values of ${e.metric}` };
  const failures: string[] = [];
  const measured: string[] = [];
  if (e.min !== undefined || e.max !== undefined) {
    const v = reduce(values, e.of);
    measured.push(`${e.of} ${fmt(v)}`);
    if (e.min !== undefined && !(v >= e.min)) failures.push(`${e.of} ${fmt(v)} is below the minimum ${e.min}`);
    if (e.max !== undefined && !(v <= e.max)) failures.push(`${e.of} ${fmt(v)} is above the maximum ${e.max}`);
  }
  if (e.trend) {
    if (values.length < 2) failures.push(`a trend needs 2 or more values, the run wrote ${values.length}`);
    else {
      const half = Math.floor(values.length / 2);
      const [a, b] = [mean(values.slice(0, half)), mean(values.slice(values.length - half))];
      measured.push(`first-half mean ${fmt(a)}, second-half mean ${fmt(b)}`);
      const ok = e.trend === 'rising' ? b > a : b < a;
      if (!ok) failures.push(`not ${e.trend}: second-half mean ${fmt(b)} against first-half mean ${fmt(a)}`);
    }
  }
  if (e.finite) {
    const bad = values.filter((v) => !Number.isFinite(v)).length;
    measured.push(`${values.length - bad} of ${values.length} values finite`);
    if (bad) failures.push(`${bad} of ${values.length} values are not finite`);
  }
  return failures.length ? { name, ok: false, detail: failures.join('; ') } : { name, ok: true, detail: measured.join('; ') };
}

/**
 * Expectations with each metric under its current name: an old camelCase series name (before
 * issue 28) still works, with a warning that names the new one.
 */
export function currentExpectations(expectations: Expectation[]): { expectations: Expectation[]; warnings: string[] } {
  const warnings: string[] = [];
  const current = expectations.map((e) => {
    const metric = currentSeriesName(e.metric);
    if (metric === e.metric) return e;
    warnings.push(`run.expect: metric ${e.metric} is now named ${metric}; write ${metric}`);
    return { ...e, metric };
  });
  return { expectations: current, warnings };
}

export function checkExpectations(expectations: Expectation[], series: Map<string, Point[]>): Verdict[] {
  return expectations.map((e) => checkExpectation(e, series));
}

/** One line per verdict, as the run prints them. */
export function formatVerdicts(verdicts: Verdict[]): string {
  return verdicts.map((v) => `expect ${v.ok ? 'ok  ' : 'FAIL'} ${v.name}: ${v.detail}`).join('\n');
}
