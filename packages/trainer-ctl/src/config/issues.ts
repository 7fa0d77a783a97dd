/** zod issues of a run config as readable messages: what was expected and what the file has. */
import type { z } from 'zod';
import type { ConfigIssue } from './errors';
import type { YamlSource } from './yaml-source';
import { discriminatorValues, schemaIssues, snakeCase, valueAt, zodIssuePath } from '@thinkfl/env';

export function describeValue(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  if (typeof v === 'string') return `string ${JSON.stringify(v)}`;
  return `${typeof v} ${String(v)}`;
}

/** Keys that moved elsewhere: D_max is given once, as episode.d_max. */
const MOVED: Record<string, string> = {
  'graders.route.d_max': 'episode.d_max',
  'stages.priming.sft.teacher.d_max': 'episode.d_max',
};

function message(issue: z.core.$ZodIssue, value: unknown, present: boolean): string {
  switch (issue.code) {
    case 'invalid_type':
      return present ? `expected ${issue.expected}, got ${describeValue(value)}` : `required: expected ${issue.expected}`;
    case 'invalid_value':
      return `expected one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}, got ${describeValue(value)}`;
    case 'invalid_union': {
      const firsts = issue.errors.map((branch) => branch[0]?.message).filter(Boolean);
      return `matches none of the accepted forms (${firsts.join('; or ')}), got ${describeValue(value)}`;
    }
    case 'custom':
      return issue.message;
    default:
      return present ? `${issue.message}, got ${describeValue(value)}` : issue.message;
  }
}

/** One ConfigIssue per problem, unknown keys one each (their hint from @thinkfl/env), located in the YAML source. */
export function toConfigIssues(error: z.ZodError, schema: z.ZodType, src: YamlSource): ConfigIssue[] {
  const out: ConfigIssue[] = [];
  for (const { path, issue, hint } of schemaIssues(error, schema, src.data)) {
    if (hint !== undefined) {
      const moved = MOVED[[...path.slice(0, -1), snakeCase(String(path[path.length - 1]))].join('.')];
      const msg = moved ? `D_max is given once, as ${moved}; remove this key` : hint;
      out.push({ path: path.join('.'), line: src.lineOf(path, true), message: msg });
      continue;
    }
    const value = valueAt(src.data, path);
    const accepted = issue.code === 'invalid_union' ? discriminatorValues(schema, path.slice(0, -1), src.data) : undefined;
    if (accepted) {
      const msg = `expected one of ${accepted.map((v) => JSON.stringify(v)).join(', ')}, got ${describeValue(value)}`;
      out.push({ path: zodIssuePath(issue), line: src.lineOf(path), message: msg });
      continue;
    }
    out.push({ path: zodIssuePath(issue), line: src.lineOf(path), message: message(issue, value, value !== undefined) });
  }
  return out.sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
}
