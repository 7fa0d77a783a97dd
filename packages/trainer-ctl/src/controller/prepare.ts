/**
 * Inputs a run needs before it starts, made when the config says how and they are missing:
 * the dataset (imported from raw telemetry, `dataset.import`) and the tiny CI model
 * (`model.create_tiny`, by scripts/create-tiny-model.ts in a child process since it drives the
 * train engine). So the README's main command works from a fresh clone after scripts/setup.sh.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { importDataset } from '@thinkfl/env';
import type { RunConfig } from '../config/index';

const REPO_ROOT = resolve(import.meta.dirname, '..', '..', '..', '..');

function runScript(args: string[], log: (line: string) => void): Promise<void> {
  return new Promise((res, rej) => {
    const child = spawn(process.execPath, ['--import', 'tsx', ...args], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let tail = '';
    const keep = (b: Buffer) => {
      tail = (tail + b.toString()).slice(-4000);
    };
    child.stdout.on('data', (b: Buffer) => log(b.toString().trimEnd()));
    child.stderr.on('data', keep);
    child.on('error', rej);
    child.on('close', (code) => (code === 0 ? res() : rej(new Error(`${args[0]} exited with ${code}:\n${tail}`))));
  });
}

export async function prepareInputs(config: RunConfig, log: (line: string) => void): Promise<void> {
  const { dataset, model } = config;
  if (!existsSync(join(dataset.path, 'meta.json')) && dataset.import) {
    log(`prepare: importing ${dataset.import.format} from ${dataset.import.src} into ${dataset.path}`);
    await importDataset({ format: dataset.import.format, src: dataset.import.src, out: dataset.path, settings: dataset.import.settings });
  }
  if (!existsSync(model.dir) && model.create_tiny) {
    if (!existsSync(join(dataset.path, 'meta.json'))) throw new Error(`prepare: the tiny model is fitted to the dataset, and ${dataset.path} holds none`);
    log(`prepare: creating the tiny model in ${model.dir}`);
    const script = join(REPO_ROOT, 'scripts', 'create-tiny-model.ts');
    const { seed, ...sizes } = model.create_tiny;
    const flags = Object.entries(sizes).flatMap(([k, v]) => (v === undefined ? [] : [`--${k.replace(/_/g, '-')}`, String(v)]));
    await runScript([script, '--dataset', dataset.path, '--out', model.dir, '--seed', String(seed), ...flags], log);
  }
}
