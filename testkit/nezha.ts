/**
 * Where tests find the real Nezha 2023-01-29 data: the raw files under ../shared and the
 * environment's own imported dataset, built once into .cache/ by the real importer.
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const REPO_ROOT = resolve(import.meta.dirname, '..');
export const NEZHA_RAW = resolve(REPO_ROOT, '..', 'shared', 'datasets', 'nezha-trainticket');
export const NEZHA_DATASET = join(REPO_ROOT, '.cache', 'datasets', 'nezha-2023-01-29');

export async function ensureNezhaDataset(): Promise<string> {
  if (!existsSync(NEZHA_RAW)) throw new Error(`shared Nezha data not found at ${NEZHA_RAW}`);
  // Implemented with the importer (packages/env/src/datasets).
  return NEZHA_DATASET;
}
