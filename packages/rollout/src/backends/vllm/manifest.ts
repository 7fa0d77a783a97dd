/**
 * The checksum manifest of a policy directory handed to inference servers
 * (<run>/adapters/v<N>): every file's size and SHA-256, written last, so a reader can tell a
 * complete, intact directory from a half-copied or damaged one without knowing what the files
 * are (a LoRA adapter, a merged export).
 */
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

export const MANIFEST_FILE = 'manifest.json';

export interface Manifest {
  version: number;
  files: Record<string, { bytes: number; sha256: string }>;
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)))
    .filter((f) => f !== MANIFEST_FILE)
    .sort();
}

export async function sha256File(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(file)) h.update(chunk as Buffer);
  return h.digest('hex');
}

/** Writes dir/manifest.json over every other file of dir. */
export async function writeManifest(dir: string, version: number): Promise<Manifest> {
  const files: Manifest['files'] = {};
  for (const f of filesUnder(dir)) files[f] = { bytes: statSync(join(dir, f)).size, sha256: await sha256File(join(dir, f)) };
  const manifest = { version, files };
  writeFileSync(join(dir, MANIFEST_FILE), `${JSON.stringify(manifest, null, 1)}\n`);
  return manifest;
}

/**
 * A short digest of what a manifest lists (every file's path, size and SHA-256): two policy
 * directories with the same digest hold the same bytes, so the digest can name their contents.
 */
export function manifestDigest(m: Manifest): string {
  const files = Object.keys(m.files)
    .sort()
    .map((f) => [f, m.files[f].bytes, m.files[f].sha256]);
  return createHash('sha256').update(JSON.stringify(files)).digest('hex').slice(0, 12);
}

/** Checks dir against its manifest (and its version); throws naming the first file that differs. */
export async function verifyManifest(dir: string, version: number): Promise<Manifest> {
  const file = join(dir, MANIFEST_FILE);
  if (!existsSync(file))
    throw new Error(`${dir}: no ${MANIFEST_FILE}; the policy directory is incomplete or was not written by the trainer`);
  const m = JSON.parse(readFileSync(file, 'utf8')) as Manifest;
  if (m.version !== version) throw new Error(`${file}: version ${m.version}, expected ${version}`);
  const listed = Object.keys(m.files).sort();
  const present = filesUnder(dir);
  const extra = present.filter((f) => !(f in m.files));
  if (extra.length) throw new Error(`${dir}: ${extra[0]} is not in ${MANIFEST_FILE}`);
  for (const f of listed) {
    const path = join(dir, f);
    if (!existsSync(path)) throw new Error(`${dir}: ${f} is listed in ${MANIFEST_FILE} but missing`);
    const bytes = statSync(path).size;
    if (bytes !== m.files[f].bytes) throw new Error(`${path}: ${bytes} bytes, the manifest says ${m.files[f].bytes}`);
    const sha = await sha256File(path);
    if (sha !== m.files[f].sha256) throw new Error(`${path}: SHA-256 ${sha}, the manifest says ${m.files[f].sha256}`);
  }
  return m;
}
