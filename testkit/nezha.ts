/**
 * Where tests find the real Nezha 2023-01-29 data: the raw files under ../shared and the
 * environment's own imported dataset, built once into .cache/ by the real importer and reused
 * while its format version, settings and the importer's code are unchanged.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import {
  CaseSettings,
  FORMAT_VERSION,
  GapSettings,
  importDataset,
  NezhaSettings,
  parseSettings,
  readMeta,
} from '../packages/env/src/datasets/index';
import { sourceHash } from './build-cache';

export const REPO_ROOT = resolve(import.meta.dirname, '..');
export const NEZHA_RAW = resolve(REPO_ROOT, '..', 'shared', 'datasets', 'nezha-trainticket');
export const NEZHA_DATASET = join(REPO_ROOT, '.cache', 'datasets', 'nezha-2023-01-29');
export const NEZHA_DATE = '2023-01-29';

/** The settings the cached dataset is imported with (all defaults for the day). */
export function nezhaTestSettings() {
  return {
    importer: parseSettings(NezhaSettings, { date: NEZHA_DATE }, 'importer'),
    cases: parseSettings(CaseSettings, {}, 'cases'),
    gaps: parseSettings(GapSettings, {}, 'gaps'),
  };
}

/** Hash of the importer's code, so that a change to it re-imports the cached dataset. */
const codeFingerprint = () => sourceHash(join(REPO_ROOT, 'packages', 'env', 'src', 'datasets'));

const FINGERPRINT = join(NEZHA_DATASET, 'code-fingerprint.txt');

async function upToDate(): Promise<boolean> {
  if (!existsSync(FINGERPRINT) || readFileSync(FINGERPRINT, 'utf8') !== codeFingerprint()) return false;
  const meta = await readMeta(NEZHA_DATASET).catch(() => undefined);
  return (
    meta?.format_version === FORMAT_VERSION &&
    meta.format === 'nezha' &&
    JSON.stringify(meta.settings) === JSON.stringify(nezhaTestSettings())
  );
}

export async function ensureNezhaDataset(): Promise<string> {
  if (!existsSync(NEZHA_RAW)) throw new Error(`shared Nezha data not found at ${NEZHA_RAW}`);
  if (await upToDate()) return NEZHA_DATASET;
  await importDataset({ format: 'nezha', src: NEZHA_RAW, out: NEZHA_DATASET, settings: nezhaTestSettings() });
  writeFileSync(FINGERPRINT, codeFingerprint());
  return NEZHA_DATASET;
}

/**
 * Extracts the named members (paths inside the archives, e.g. `rca_data/2023-01-29/trace/08_43_trace.csv`)
 * of the shared Nezha tgz files into a fresh temp dir, so tests can compare against raw rows.
 */
export function extractNezhaRaw(members: string[]): string {
  const out = mkdtempSync(join(tmpdir(), 'nezha-raw-'));
  const logs = members.filter((m) => m.includes('/log/'));
  const data = members.filter((m) => !m.includes('/log/'));
  const archive = (suffix: string) => join(NEZHA_RAW, `trainticket-${NEZHA_DATE}${suffix}.tgz`);
  if (data.length) execFileSync('tar', ['-xzf', archive(''), '-C', out, ...data]);
  if (logs.length) execFileSync('tar', ['-xzf', archive('-logs'), '-C', out, ...logs]);
  return out;
}

/**
 * A cut of the real day that is complete for the minutes it names: the fault list, every
 * metric file, the fault-free traces and, per minute `HH_MM`, its trace and traceid files (and
 * log file `withLogs`). Extracted from the shared archives into a fresh temp dir.
 */
export function nezhaCut(minutes: string[], withLogs = false): string {
  const r = `rca_data/${NEZHA_DATE}`;
  return extractNezhaRaw([
    `${r}/${NEZHA_DATE}-fault_list.json`,
    `${r}/metric`,
    `construct_data/${NEZHA_DATE}/trace`,
    ...minutes.flatMap((m) => [
      `${r}/trace/${m}_trace.csv`,
      `${r}/traceid/${m}_traceid.csv`,
      ...(withLogs ? [`${r}/log/${m}_log.csv`] : []),
    ]),
  ]);
}

/**
 * A damaged copy of a source tree in a fresh temp dir: every file a symlink to the original
 * (the data is large and left untouched), less the `remove`d files and folders (paths relative
 * to the tree), with the `write` files holding new content instead.
 */
export function damagedCopy(tree: string, damage: { remove?: string[]; write?: Record<string, string | Buffer> }): string {
  const out = mkdtempSync(join(tmpdir(), 'nezha-damaged-'));
  const removed = new Set(damage.remove ?? []);
  const walk = (rel: string) => {
    for (const name of readdirSync(join(tree, rel))) {
      const r = rel ? `${rel}/${name}` : name;
      if (removed.has(r)) continue;
      if (statSync(join(tree, r)).isDirectory()) {
        mkdirSync(join(out, r), { recursive: true });
        walk(r);
      } else if (damage.write?.[r] === undefined) symlinkSync(join(tree, r), join(out, r));
    }
  };
  walk('');
  for (const [r, content] of Object.entries(damage.write ?? {})) writeFileSync(join(out, r), content);
  return out;
}
