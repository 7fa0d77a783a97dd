/**
 * Paths of a validated run config: made absolute (relative ones resolve against run.base_dir,
 * itself relative to the YAML file), then checked to exist before any work starts.
 */
import { existsSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import type { ConfigIssue } from './errors';
import type { RunConfig } from './schema';
import type { YamlPath, YamlSource } from './yaml-source';

/** The run directory: <run.output_dir>/<run.name>. */
export function runDir(c: RunConfig): string {
  return join(c.run.output_dir, c.run.name);
}

function isJinjaPath(t: string): boolean {
  return t.endsWith('.jinja') || t.endsWith('.j2');
}

/** A copy of `c` with every path absolute. */
export function resolvePaths(c: RunConfig, file: string): RunConfig {
  const base = resolve(dirname(resolve(file)), c.run.base_dir);
  const abs = (p: string) => (isAbsolute(p) ? p : resolve(base, p));
  const out: RunConfig = structuredClone(c);
  out.run.base_dir = base;
  out.run.output_dir = abs(c.run.output_dir);
  out.model.dir = abs(c.model.dir);
  out.model.cache_dir = abs(c.model.cache_dir);
  if (c.tokenizer.dir !== undefined) out.tokenizer.dir = abs(c.tokenizer.dir);
  if (isJinjaPath(c.tokenizer.chat_template)) out.tokenizer.chat_template = abs(c.tokenizer.chat_template);
  out.dataset.path = abs(c.dataset.path);
  if (out.dataset.import !== undefined) out.dataset.import.src = abs(out.dataset.import.src);
  if (out.generation.backend.kind === 'onnx' && out.generation.backend.model_dir !== undefined) {
    out.generation.backend.model_dir = abs(out.generation.backend.model_dir);
  }
  if (c.workers.train.deepspeed_config !== undefined) out.workers.train.deepspeed_config = abs(c.workers.train.deepspeed_config);
  out.workers.train.autocast_cache = abs(c.workers.train.autocast_cache);
  out.workers.train.onnx_graph_cache = c.workers.train.onnx_graph_cache === null ? null : abs(c.workers.train.onnx_graph_cache);
  return out;
}

type Kind = 'directory' | 'file';

function problem(p: string, kind: Kind): string | undefined {
  if (!existsSync(p)) return `no such ${kind}: ${p}`;
  const isDir = statSync(p).isDirectory();
  if (kind === 'directory' && !isDir) return `not a directory: ${p}`;
  if (kind === 'file' && isDir) return `a directory, expected a file: ${p}`;
  return undefined;
}

/** Every input path that must exist and does not, located in the YAML source. */
export function checkPaths(c: RunConfig, src: YamlSource): ConfigIssue[] {
  const issues: ConfigIssue[] = [];
  const check = (path: YamlPath, p: string | undefined, kind: Kind, hint = '') => {
    if (p === undefined) return;
    const msg = problem(p, kind);
    if (msg) issues.push({ path: path.join('.'), line: src.lineOf(path), message: msg + hint });
  };
  // A dataset with dataset.import and a model with model.create_tiny are made by `trainer-ctl train` when missing.
  if (c.dataset.import === undefined) check(['dataset', 'path'], c.dataset.path, 'directory', ' (import one with `trainer-ctl import`)');
  if (c.dataset.import === undefined && !problem(c.dataset.path, 'directory') && !existsSync(join(c.dataset.path, 'meta.json'))) {
    issues.push({
      path: 'dataset.path',
      line: src.lineOf(['dataset', 'path']),
      message: `not an imported dataset (no meta.json in ${c.dataset.path}; import it with \`trainer-ctl import\`)`,
    });
  }
  // A hub model may be downloaded later; a local-only model must already be there.
  if (c.model.hub_id === undefined && c.model.create_tiny === undefined) check(['model', 'dir'], c.model.dir, 'directory');
  check(['tokenizer', 'dir'], c.tokenizer.dir, 'directory');
  if (isAbsolute(c.tokenizer.chat_template)) check(['tokenizer', 'chat_template'], c.tokenizer.chat_template, 'file');
  if (c.generation.backend.kind === 'onnx') check(['generation', 'backend', 'model_dir'], c.generation.backend.model_dir, 'directory');
  check(['workers', 'train', 'deepspeed_config'], c.workers.train.deepspeed_config, 'file');
  const python = c.workers.train.python;
  if (python !== undefined && isAbsolute(python)) check(['workers', 'train', 'python'], python, 'file');
  return issues;
}
