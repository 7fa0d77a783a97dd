/** A bad run config: every problem found, each naming the file, line and YAML path. */

export interface ConfigIssue {
  /** Dotted YAML path, e.g. grpo.group_size; empty for the top level. */
  path: string;
  /** 1-based line in the YAML file; undefined when the file has no node near the path. */
  line?: number;
  message: string;
}

export function formatIssue(file: string, i: ConfigIssue): string {
  const where = i.line === undefined ? file : `${file}:${i.line}`;
  return `${where}: ${i.path || '(top level)'}: ${i.message}`;
}

export class ConfigError extends Error {
  constructor(
    readonly file: string,
    readonly issues: ConfigIssue[],
  ) {
    super(issues.map((i) => formatIssue(file, i)).join('\n'));
    this.name = 'ConfigError';
  }
}
