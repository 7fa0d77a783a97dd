/**
 * `trainer-ctl push RUN_DIR --repo ID`: publishes a run's policy (its newest checkpoint, or the
 * directory given) with a model card carrying the run's evaluation table, through
 * @huggingface/hub (repository created when missing; large files through the hub's LFS batch
 * API, in as many parts as the hub asks for). Only the policy goes: from a LoRA directory
 * (adapter_config.json, no config.json) the adapter, whose adapter_config.json names the base by
 * its hub id instead of the local path the engine wrote, so that a downloaded adapter loads;
 * from a full model its config, weights and tokenizer files. Optimizer, KL reference and
 * DeepSpeed state, the merged export and run bookkeeping stay home. Every file is streamed from
 * disk (disk-blob.ts), hashed and sent chunk by chunk, never read whole.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { createRepo, HubApiError, uploadFiles } from '@huggingface/hub';
import { parse } from 'yaml';
import { DiskBlob } from './disk-blob';
import type { HubAccess } from './endpoint';
import { streamingFetch } from './streaming-fetch';
import { modelCard } from './model-card';
import { MODEL_CONFIG_FILES, SAFETENSORS_FILES } from './model-files';

export interface PushOptions extends HubAccess {
  runDir: string;
  repo: string;
  /** Directory to upload; default the newest checkpoint of the run, else its newest exported policy. */
  from?: string;
  private?: boolean;
  /** Hub id of the backbone for the card and a LoRA adapter's config. Default: model.hub_id of the run's config.yaml. */
  baseModel?: string;
  log?: (line: string) => void;
}

const newest = (root: string, re: RegExp) =>
  existsSync(root)
    ? readdirSync(root)
        .filter((n) => re.test(n))
        .sort((a, b) => Number(/\d+/.exec(a)![0]) - Number(/\d+/.exec(b)![0]))
        .map((n) => join(root, n))
        .at(-1)
    : undefined;

/** What push uploads when not told: checkpoints/update-N, then adapters/vN, then policies/vN, newest first. */
export function pushSource(runDir: string): string {
  const dir =
    newest(join(runDir, 'checkpoints'), /^update-\d+$/) ??
    newest(join(runDir, 'adapters'), /^v\d+$/) ??
    newest(join(runDir, 'policies'), /^v\d+$/);
  if (!dir) throw new Error(`${runDir}: no checkpoints/, adapters/ or policies/ to push; is it a run directory?`);
  return dir;
}

export const ADAPTER_CONFIG = 'adapter_config.json';
/** A PEFT adapter's weights. */
const ADAPTER_FILES = [/^adapter_model\.safetensors$/];
/** A full model: what transformers loads, as download.ts takes it from the hub. */
const MODEL_FILES = [...MODEL_CONFIG_FILES, /^chat_template\.json$/, ...SAFETENSORS_FILES];

/** A LoRA directory holds the adapter at its top and no full model beside it (models.py's rule). */
export const isAdapterDir = (dir: string) => existsSync(join(dir, ADAPTER_CONFIG)) && !existsSync(join(dir, 'config.json'));

/** The files of `dir` (top level only) that make up the policy. */
export function policyFiles(dir: string): string[] {
  const keep = isAdapterDir(dir) ? ADAPTER_FILES : MODEL_FILES;
  return readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isFile() && keep.some((re) => re.test(e.name)))
    .map((e) => e.name)
    .sort();
}

/** model.hub_id of the run's config.yaml (the copy trainer-ctl train keeps in the run directory), if any. */
function runHubId(runDir: string): string | undefined {
  const file = join(runDir, 'config.yaml');
  if (!existsSync(file)) return undefined;
  const id = (parse(readFileSync(file, 'utf8')) as { model?: { hub_id?: unknown } } | null)?.model?.hub_id;
  return typeof id === 'string' ? id : undefined;
}

export async function pushRun(o: PushOptions): Promise<{ commit?: string; files: string[] }> {
  if (!o.token) throw new Error('push needs HF_TOKEN: a token with write access to the repository');
  const from = o.from ?? pushSource(o.runDir);
  if (!existsSync(from) || !statSync(from).isDirectory()) throw new Error(`${from}: not a directory`);
  const adapter = isAdapterDir(from);
  const baseModel = o.baseModel ?? runHubId(o.runDir);
  if (adapter && !baseModel) {
    throw new Error(
      `${from} is a LoRA adapter: its base must be named by hub id (--base-model, or model.hub_id in ${join(o.runDir, 'config.yaml')}), or a downloaded adapter cannot be loaded`,
    );
  }
  const paths = policyFiles(from);
  if (!paths.some((p) => p.endsWith('.safetensors')))
    throw new Error(`${from}: no ${adapter ? 'adapter_model.safetensors' : '*.safetensors weights'} to push`);
  const credentials = { hubUrl: o.endpoint, accessToken: o.token };
  try {
    await createRepo({ repo: o.repo, private: o.private ?? true, ...credentials });
    o.log?.(`push: created ${o.repo}`);
  } catch (e) {
    // 409: it exists already, the commit goes on top.
    if (!(e instanceof HubApiError && e.statusCode === 409)) throw e;
  }
  const source = relative(o.runDir, from);
  const files: { path: string; content: Blob }[] = paths.map((p) => ({ path: p, content: DiskBlob.of(join(from, p)) }));
  if (adapter) {
    const config = JSON.parse(readFileSync(join(from, ADAPTER_CONFIG), 'utf8')) as Record<string, unknown>;
    files.unshift({
      path: ADAPTER_CONFIG,
      content: new Blob([`${JSON.stringify({ ...config, base_model_name_or_path: baseModel }, null, 2)}\n`]),
    });
  }
  const card = modelCard({
    repo: o.repo,
    runDir: o.runDir,
    source,
    library: adapter ? 'peft' : 'transformers',
    ...(baseModel ? { baseModel } : {}),
  });
  files.push({ path: 'README.md', content: new Blob([card]) });
  const out = await uploadFiles({
    repo: o.repo,
    files,
    commitTitle: `thinkfl: ${source}`,
    useXet: false,
    fetch: streamingFetch,
    ...credentials,
  });
  o.log?.(`push: ${files.length} files to ${o.repo}${out?.commit ? ` (commit ${out.commit.oid})` : ''}`);
  return { commit: out?.commit.oid, files: files.map((f) => f.path) };
}
