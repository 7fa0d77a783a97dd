/**
 * `model.hub_id` at a revision into a local directory: the files a backbone needs (config,
 * generation config, tokenizer files, chat template, safetensors shards and their index; the
 * PyTorch .bin weights only in a repository without safetensors, as transformers prefers)
 * listed with @huggingface/hub, each downloaded through `<file>.part` and resumed with an HTTP
 * Range request when a previous download was cut, then checked against the hub's checksum
 * (SHA-256 of LFS files, the git blob SHA-1 of the others) before it is renamed into place. A
 * file already there with the right checksum is not fetched again, so a complete directory
 * works offline.
 */
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createReadStream, createWriteStream, existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { HubApiError, listFiles, type ListFileEntry } from '@huggingface/hub';
import type { HubAccess } from './endpoint';
import { MODEL_CONFIG_FILES, SAFETENSORS_FILES } from './model-files';

/** Files of a model repository a backbone needs. */
const WANTED = [...MODEL_CONFIG_FILES, ...SAFETENSORS_FILES];
/** Weights taken only when the repository has no safetensors. */
const FALLBACK = [/^pytorch_model(-\d+-of-\d+)?\.bin$/, /^pytorch_model\.bin\.index\.json$/];

export interface DownloadOptions extends HubAccess {
  hubId: string;
  revision: string;
  dir: string;
  log?: (line: string) => void;
}

export class HubDownloadError extends Error {}

/** Checksum of a file the way the hub lists it: sha256 for LFS files, the git blob sha1 otherwise. */
async function checksum(file: string, entry: ListFileEntry): Promise<string> {
  const h = createHash(entry.lfs ? 'sha256' : 'sha1');
  if (!entry.lfs) h.update(`blob ${statSync(file).size}\0`);
  for await (const chunk of createReadStream(file)) h.update(chunk as Buffer);
  return h.digest('hex');
}

const expected = (e: ListFileEntry) => e.lfs?.oid ?? e.oid;

function describe(e: unknown, o: DownloadOptions): Error {
  if (e instanceof HubApiError) {
    const where = `model.hub_id ${o.hubId} at revision ${o.revision} on ${o.endpoint}`;
    if (e.statusCode === 401 || e.statusCode === 403) {
      return new HubDownloadError(
        `${where}: access refused (HTTP ${e.statusCode}); the repository is gated or private: accept its terms on the hub and set HF_TOKEN to a token with access${o.token ? ' (the HF_TOKEN given has none)' : ''}`,
      );
    }
    if (e.statusCode === 404)
      return new HubDownloadError(`${where}: no such repository or revision (HTTP 404): check the id and model.revision`);
    return new HubDownloadError(`${where}: HTTP ${e.statusCode}: ${e.message}`);
  }
  return e as Error;
}

/** Downloads what is missing or damaged; returns the files of the directory it checked. */
export async function downloadModel(o: DownloadOptions): Promise<string[]> {
  const log = o.log ?? (() => undefined);
  const listed: ListFileEntry[] = [];
  try {
    for await (const e of listFiles({
      repo: o.hubId,
      revision: o.revision,
      recursive: true,
      hubUrl: o.endpoint,
      ...(o.token ? { accessToken: o.token } : {}),
    })) {
      if (e.type === 'file') listed.push(e);
    }
  } catch (e) {
    throw describe(e, o);
  }
  const matches = (res: RegExp[]) => listed.filter((e) => !e.path.includes('/') && res.some((re) => re.test(e.path)));
  const entries = matches(WANTED);
  if (!entries.some((e) => e.path.endsWith('.safetensors'))) entries.push(...matches(FALLBACK));
  if (!entries.some((e) => e.path === 'config.json'))
    throw new HubDownloadError(`model.hub_id ${o.hubId} at ${o.revision}: the repository has no config.json; is it a model?`);
  for (const e of entries) {
    const target = join(o.dir, e.path);
    if (existsSync(target) && statSync(target).size === e.size && (await checksum(target, e)) === expected(e)) continue;
    await fetchFile(o, e, target, log);
  }
  return entries.map((e) => e.path);
}

async function fetchFile(o: DownloadOptions, e: ListFileEntry, target: string, log: (line: string) => void): Promise<void> {
  const part = `${target}.part`;
  mkdirSync(dirname(target), { recursive: true });
  const have = existsSync(part) ? statSync(part).size : 0;
  const url = `${o.endpoint}/${o.hubId}/resolve/${encodeURIComponent(o.revision)}/${e.path.split('/').map(encodeURIComponent).join('/')}`;
  const headers: Record<string, string> = { ...(o.token ? { authorization: `Bearer ${o.token}` } : {}) };
  if (have > 0 && have < e.size) headers.range = `bytes=${have}-`;
  const res = await fetch(url, { headers });
  if (res.status === 401 || res.status === 403) throw describe(new HubApiError(url, res.status), o);
  if (!res.ok || !res.body) throw new HubDownloadError(`${url}: HTTP ${res.status}`);
  // 206: the server resumed where the part ends; 200: it sent the whole file again.
  const resumed = res.status === 206;
  log(`hub: ${e.path} (${e.size} bytes)${resumed ? ` resumed at byte ${have}` : ''}`);
  const out = createWriteStream(part, { flags: resumed ? 'a' : 'w' });
  try {
    await pipeline(Readable.fromWeb(res.body as import('node:stream/web').ReadableStream), out);
  } catch (err) {
    // A cut download rejects while the file's last writes may still be in flight: the next
    // attempt resumes from the part's size, so it must be final (closed) before this returns.
    if (!out.closed) await once(out, 'close');
    throw err;
  }
  const size = statSync(part).size;
  const sum = await checksum(part, e);
  if (size !== e.size || sum !== expected(e)) {
    // A damaged part is not resumed from: the next attempt starts over.
    rmSync(part, { force: true });
    throw new HubDownloadError(
      `${o.hubId}@${o.revision}: ${e.path}: checksum mismatch: got ${size} bytes with ${e.lfs ? 'sha256' : 'git sha1'} ${sum}, the hub lists ${e.size} bytes with ${expected(e)}; the partial file was removed, run again to download it anew`,
    );
  }
  renameSync(part, target);
}
