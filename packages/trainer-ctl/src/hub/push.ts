/**
 * `trainer-ctl push RUN_DIR --repo ID`: uploads a run's newest checkpoint (or the directory
 * given) with a model card carrying the run's evaluation table, through @huggingface/hub
 * (repository created when missing; large files through the hub's LFS batch API).
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { createRepo, HubApiError, uploadFiles } from '@huggingface/hub';
import type { HubAccess } from './endpoint';
import { modelCard } from './model-card';

export interface PushOptions extends HubAccess {
  runDir: string;
  repo: string;
  /** Directory to upload; default the newest checkpoint of the run, else its newest exported policy. */
  from?: string;
  private?: boolean;
  /** Hub id of the backbone, named in the card's metadata. */
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
  const dir = newest(join(runDir, 'checkpoints'), /^update-\d+$/) ?? newest(join(runDir, 'adapters'), /^v\d+$/) ?? newest(join(runDir, 'policies'), /^v\d+$/);
  if (!dir) throw new Error(`${runDir}: no checkpoints/, adapters/ or policies/ to push; is it a run directory?`);
  return dir;
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)));
}

export async function pushRun(o: PushOptions): Promise<{ commit?: string; files: string[] }> {
  if (!o.token) throw new Error('push needs HF_TOKEN: a token with write access to the repository');
  const from = o.from ?? pushSource(o.runDir);
  if (!existsSync(from) || !statSync(from).isDirectory()) throw new Error(`${from}: not a directory`);
  const credentials = { hubUrl: o.endpoint, accessToken: o.token };
  try {
    await createRepo({ repo: o.repo, private: o.private ?? true, ...credentials });
    o.log?.(`push: created ${o.repo}`);
  } catch (e) {
    // 409: it exists already, the commit goes on top.
    if (!(e instanceof HubApiError && e.statusCode === 409)) throw e;
  }
  const paths = filesUnder(from).filter((p) => p !== 'README.md');
  const files = [
    ...paths.map((p) => ({ path: p, content: new Blob([readFileSync(join(from, p))]) })),
    { path: 'README.md', content: new Blob([modelCard({ repo: o.repo, runDir: o.runDir, source: relative(o.runDir, from), ...(o.baseModel ? { baseModel: o.baseModel } : {}) })]) },
  ];
  const out = await uploadFiles({ repo: o.repo, files, commitTitle: `thinkfl: ${relative(o.runDir, from)}`, useXet: false, ...credentials });
  o.log?.(`push: ${files.length} files to ${o.repo}${out?.commit ? ` (commit ${out.commit.oid})` : ''}`);
  return { commit: out?.commit.oid, files: files.map((f) => f.path) };
}
