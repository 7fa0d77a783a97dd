/**
 * zod issues as `where.path.to.key: message`: the one formatter of validation errors for every
 * package, so that a bad setting names its YAML path (`where` is where the parsed value sits in
 * the config, e.g. `env.episode`).
 */
import type { z } from 'zod';

type Issue = z.core.$ZodIssue;

/** The issue's dotted path below `where`; '' when it is about the parsed value itself and `where` is ''. */
export function zodIssuePath(issue: Issue, where = ''): string {
  return [where, ...issue.path.map(String)].filter((s) => s !== '').join('.');
}

/** One issue as `path: message`; `root` stands for an empty path (the value as a whole). */
export function formatZodIssue(issue: Issue, where = '', root = '(root)'): string {
  return `${zodIssuePath(issue, where) || root}: ${issue.message}`;
}

export interface IssueListFormat {
  /** Between two issues; default '; '. */
  separator?: string;
  /** At most this many issues; default all. */
  limit?: number;
  /** For an issue with an empty path; default '(root)'. */
  root?: string;
}

/** Every issue (or the first `limit`) as `path: message`, joined by `separator`. */
export function formatZodIssues(error: z.ZodError, where = '', { separator = '; ', limit, root }: IssueListFormat = {}): string {
  return error.issues
    .slice(0, limit)
    .map((i) => formatZodIssue(i, where, root))
    .join(separator);
}
