/**
 * Inputs a run needs before it starts, made when the config says how and they are missing:
 * the dataset (imported from raw telemetry, `dataset.import`), the backbone (downloaded from
 * the Hugging Face Hub, `model.hub_id`) and the tiny CI model
 * (`model.create_tiny`, by scripts/create-tiny-model.ts in a child process since it drives the
 * train engine). So the README's main command works from a fresh clone after scripts/setup.sh.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { FORMAT_VERSION, gapLines, importDataset, metaFormatVersion } from '@thinkfl/env';
import type { RunConfig } from '../config/index';
import { downloadModel, hubAccess } from '../hub/index';

const REPO_ROOT = resolve(import.meta.dirname, '..', '..', '..', '..');

function runScript(args: string[], log: (line: string) => void, signal?: AbortSignal): Promise<void> {
  return new Promise((res, rej) => {
    const child = spawn(process.execPath, ['--import', 'tsx', ...args], { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'], signal });
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

/** config.json keys of the tiny model's sizes in model.create_tiny. */
const TINY_KEYS = {
  hidden_size: 'hidden_size',
  layers: 'num_hidden_layers',
  heads: 'num_attention_heads',
  kv_heads: 'num_key_value_heads',
  head_dim: 'head_dim',
  intermediate_size: 'intermediate_size',
} as const;

/**
 * A tiny model already in model.dir must have the sizes model.create_tiny asks for: an edited
 * preset would otherwise train the old model without a word.
 */
function checkTinyModel(dir: string, want: NonNullable<RunConfig['model']['create_tiny']>): void {
  const file = join(dir, 'config.json');
  if (!existsSync(file)) return;
  const have = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  if (have.model_type !== 'llama') {
    throw new Error(
      `model.create_tiny makes a llama model, but the model in ${dir} has model_type ${String(have.model_type)}: ` +
        'delete that directory to create the tiny model anew, or set model.dir elsewhere',
    );
  }
  for (const [key, field] of Object.entries(TINY_KEYS)) {
    const v = want[key as keyof typeof TINY_KEYS];
    if (v !== undefined && have[field] !== v) {
      throw new Error(
        `model.create_tiny.${key} is ${v}, but the model in ${dir} has ${field} ${String(have[field])}: ` +
          'delete that directory to create the tiny model anew, or set model.dir elsewhere',
      );
    }
  }
}

/** `signal` stops a child process the preparation runs (a stopped run leaves nothing behind). */
export async function prepareInputs(config: RunConfig, log: (line: string) => void, signal?: AbortSignal): Promise<void> {
  const { dataset, model } = config;
  const metaFile = join(dataset.path, 'meta.json');
  const version = existsSync(metaFile) ? metaFormatVersion(JSON.parse(readFileSync(metaFile, 'utf8'))) : undefined;
  // A dataset an older importer wrote is imported again when the config says how; else loading it names the mismatch.
  if (version !== undefined && version !== FORMAT_VERSION && dataset.import) {
    log(`prepare: ${dataset.path} has dataset format ${version}, this code reads ${FORMAT_VERSION}: importing it again`);
  }
  if ((version === undefined || version !== FORMAT_VERSION) && dataset.import) {
    log(`prepare: importing ${dataset.import.format} from ${dataset.import.src} into ${dataset.path}`);
    const imported = await importDataset({
      format: dataset.import.format,
      src: dataset.import.src,
      out: dataset.path,
      settings: dataset.import.settings,
    });
    for (const line of gapLines(imported.meta.gaps)) log(`prepare: warning: ${line}`);
  }
  // A directory with its config.json is used as it is, offline; otherwise hub_id fills it.
  if (model.hub_id && !existsSync(join(model.dir, 'config.json'))) {
    log(`prepare: downloading ${model.hub_id} at ${model.revision} into ${model.dir}`);
    await downloadModel({ ...hubAccess(), hubId: model.hub_id, revision: model.revision, dir: model.dir, log });
  }
  if (existsSync(model.dir) && model.create_tiny) checkTinyModel(model.dir, model.create_tiny);
  if (!existsSync(model.dir) && model.create_tiny) {
    if (!existsSync(join(dataset.path, 'meta.json')))
      throw new Error(`prepare: the tiny model is fitted to the dataset, and ${dataset.path} holds none`);
    log(`prepare: creating the tiny model in ${model.dir}`);
    const script = join(REPO_ROOT, 'scripts', 'create-tiny-model.ts');
    const { seed, ...sizes } = model.create_tiny;
    const flags = Object.entries(sizes).flatMap(([k, v]) => (v === undefined ? [] : [`--${k.replace(/_/g, '-')}`, String(v)]));
    await runScript([script, '--dataset', dataset.path, '--out', model.dir, '--seed', String(seed), ...flags], log, signal);
  }
}
