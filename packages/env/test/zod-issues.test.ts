/** The one formatter of validation errors: each issue names its dotted path below the YAML path it was parsed at. */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { formatZodIssue, formatZodIssues, zodIssuePath } from '../src/zod-issues';
import { AnomalySettings, CaseSettings } from '../src/datasets/settings';

const schema = z.object({ a: z.object({ b: z.number() }), list: z.array(z.string()) }).strict();
const errorOf = (input: unknown): z.ZodError => {
  const r = schema.safeParse(input);
  if (r.success) throw new Error('expected a failure');
  return r.error;
};

describe('formatZodIssues', () => {
  it('prefixes every issue with the YAML path, list indices as segments, joined by "; "', () => {
    const e = errorOf({ a: { b: 'x' }, list: ['ok', 3] });
    expect(formatZodIssues(e, 'env.x')).toBe(
      'env.x.a.b: Invalid input: expected number, received string; env.x.list.1: Invalid input: expected string, received number',
    );
  });

  it('names the parsed value itself as root, and keeps to the limit and separator asked for', () => {
    const e = errorOf({ a: { b: 1 }, list: [], extra: 1 });
    expect(formatZodIssues(e, '', { root: '(arguments)' })).toBe('(arguments): Unrecognized key: "extra"');
    expect(formatZodIssues(e, 'tools')).toBe('tools: Unrecognized key: "extra"');
    const two = errorOf({ a: { b: 'x' }, list: [1] });
    expect(formatZodIssues(two, 'g', { separator: '\n' })).toBe(
      'g.a.b: Invalid input: expected number, received string\ng.list.0: Invalid input: expected string, received number',
    );
    expect(formatZodIssues(two, 'g', { limit: 1 })).toBe('g.a.b: Invalid input: expected number, received string');
  });

  it('gives one issue and its path on their own', () => {
    const [issue] = errorOf({ a: {}, list: [] }).issues;
    expect(zodIssuePath(issue)).toBe('a.b');
    expect(zodIssuePath(issue, 'run')).toBe('run.a.b');
    expect(formatZodIssue(issue, '', 'body')).toBe('a.b: Invalid input: expected number, received undefined');
  });
});

describe('unknown keys, given the schema', () => {
  const hinted = (input: unknown, schema: z.ZodType = schema0) => {
    const r = schema.safeParse(input);
    if (r.success) throw new Error('expected a failure');
    return formatZodIssues(r.error, 'cases', { schema, data: input, separator: '\n' });
  };
  const schema0 = CaseSettings;

  it('names an old camelCase key with its snake_case spelling, at any depth, one line per key', () => {
    expect(
      hinted({ maxCasesPerFault: 3, anomaly: { latencyFactor: 2, spanSlowdownMs: 0 } })
        .split('\n')
        .sort(),
    ).toEqual([
      'cases.anomaly.latencyFactor: renamed: write latency_factor (keys are snake_case)',
      'cases.anomaly.spanSlowdownMs: renamed: write span_slowdown_ms (keys are snake_case)',
      'cases.maxCasesPerFault: renamed: write max_cases_per_fault (keys are snake_case)',
    ]);
  });

  it('suggests the close key of a misspelt one and lists the keys taken', () => {
    expect(hinted({ latency_facter: 2 }, AnomalySettings)).toBe(
      'cases.latency_facter: unknown key (did you mean latency_factor?); expected one of: rule, thinkfl_factor, latency_factor, latency_sigma, span_slowdown_ms, call_pattern, min_baseline_count',
    );
  });

  it('reports a required key written camelCase as renamed only, not also as missing', () => {
    const req = z.object({ d_max: z.number() }).strict();
    expect(hinted({ dMax: 4 }, req)).toBe('cases.dMax: renamed: write d_max (keys are snake_case)');
  });
});
