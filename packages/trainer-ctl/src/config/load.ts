/**
 * Loading a run config: YAML -> schema (defaults, types, unknown keys) -> absolute paths ->
 * paths that must exist. Every failure is a ConfigError naming file, line and YAML path, and
 * all of it happens before a run does any work.
 */
import { readFileSync } from 'node:fs';
import { ConfigError } from './errors';
import { toConfigIssues } from './issues';
import { checkPaths, resolvePaths, runDir } from './paths';
import { RunConfigSchema, type RunConfig } from './schema';
import { parseYamlSource } from './yaml-source';

export interface LoadOptions {
  /** Check that the dataset, model and other input paths exist. Default true. */
  checkPaths?: boolean;
}

export interface LoadedRunConfig {
  file: string;
  config: RunConfig;
  /** Absolute run directory: <run.output_dir>/<run.name>. */
  runDir: string;
}

/** Validates YAML text as a run config; `file` names it in errors and anchors relative paths. */
export function parseRunConfig(text: string, file: string, opts: LoadOptions = {}): LoadedRunConfig {
  const src = parseYamlSource(text, file);
  const data = src.data ?? {};
  const r = RunConfigSchema.safeParse(data);
  if (!r.success) throw new ConfigError(file, toConfigIssues(r.error, RunConfigSchema, { ...src, data }));
  const config = resolvePaths(r.data, file);
  if (opts.checkPaths ?? true) {
    const missing = checkPaths(config, src);
    if (missing.length > 0) throw new ConfigError(file, missing);
  }
  return { file, config, runDir: runDir(config) };
}

/** Reads and validates a run config file. */
export function loadRunConfig(file: string, opts: LoadOptions = {}): LoadedRunConfig {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigError(file, [{ path: '', message: `cannot read the run config: ${(e as Error).message}` }]);
  }
  return parseRunConfig(text, file, opts);
}
