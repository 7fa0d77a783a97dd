/**
 * zod issues as `where.path.to.key: message`: the one formatter of validation errors for every
 * package, so that a bad setting names its YAML path (`where` is where the parsed value sits in
 * the config, e.g. `env.episode`). Given the schema, an unknown key gets its hint (zod-keys.ts):
 * an old camelCase spelling is named with its snake_case one.
 */
import type { z } from 'zod';
import { knownKeys, snakeCase, unknownKeyHint, valueAt } from './zod-keys';

type Issue = z.core.$ZodIssue;

/** The issue's dotted path below `where`; '' when it is about the parsed value itself and `where` is ''. */
export function zodIssuePath(issue: Issue, where = ''): string {
  return [where, ...issue.path.map(String)].filter((s) => s !== '').join('.');
}

/** One issue as `path: message`; `root` stands for an empty path (the value as a whole). */
export function formatZodIssue(issue: Issue, where = '', root = '(root)'): string {
  return `${zodIssuePath(issue, where) || root}: ${issue.message}`;
}

/** One problem of a failed parse: an issue, or one unknown key of an issue (with its hint). */
export interface SchemaIssue {
  /** Path of the problem in the parsed data; an unknown key's ends with the key. */
  path: (string | number)[];
  issue: Issue;
  /** For an unknown key: what is wrong with it (renamed, did you mean, the keys taken). */
  hint?: string;
}

/**
 * The issues of a failed parse of `data` by `schema`, unknown keys one each with their hint. A
 * required key written in its old camelCase spelling is reported as renamed, not also as missing.
 */
export function schemaIssues(error: z.ZodError, schema: z.ZodType, data: unknown): SchemaIssue[] {
  const respelt = new Set(
    error.issues.flatMap((i) => (i.code === 'unrecognized_keys' ? i.keys.map((k) => [...i.path, snakeCase(k)].join('.')) : [])),
  );
  const out: SchemaIssue[] = [];
  for (const issue of error.issues) {
    const path = issue.path as (string | number)[];
    if (respelt.has(path.join('.')) && valueAt(data, path) === undefined) continue;
    if (issue.code !== 'unrecognized_keys') {
      out.push({ path, issue });
      continue;
    }
    const known = knownKeys(schema, path, data);
    for (const key of issue.keys) out.push({ path: [...path, key], issue, hint: unknownKeyHint(key, known) });
  }
  return out;
}

export interface IssueListFormat {
  /** Between two issues; default '; '. */
  separator?: string;
  /** At most this many issues; default all. */
  limit?: number;
  /** For an issue with an empty path; default '(root)'. */
  root?: string;
  /** The schema that refused `data`: unknown keys are then named one each with their hint (schemaIssues). */
  schema?: z.ZodType;
  /** The value the schema refused (unions are matched on it). */
  data?: unknown;
}

/** Every issue (or the first `limit`) as `path: message`, joined by `separator`. */
export function formatZodIssues(
  error: z.ZodError,
  where = '',
  { separator = '; ', limit, root = '(root)', schema, data }: IssueListFormat = {},
): string {
  const issues: SchemaIssue[] = schema
    ? schemaIssues(error, schema, data)
    : error.issues.map((issue) => ({ path: issue.path as (string | number)[], issue }));
  return issues
    .slice(0, limit)
    .map(({ path, issue, hint }) => `${[where, ...path.map(String)].filter((s) => s !== '').join('.') || root}: ${hint ?? issue.message}`)
    .join(separator);
}
