/**
 * RUN_DIR/metrics.jsonl: one JSON line per completed SFT update, GRPO step or tracking point
 * (logging.track: training cases played greedily). A line is
 * appended before the state that counts it is written; a resume cuts the file back to the
 * lines the state counts, so a step replayed after a kill is never logged twice.
 */
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { writing } from '../disk-errors';

export const METRICS_FILE = 'metrics.jsonl';
/** logging.episodes_per_step whole episodes per step and evaluation, for reading what the policy does. */
export const EPISODES_FILE = 'episodes.jsonl';

export type MetricsRecord = Record<string, unknown> & { kind: 'sft' | 'grpo' | 'track' };

export function appendMetrics(runDir: string, record: MetricsRecord): void {
  const file = join(runDir, METRICS_FILE);
  writing(file, () => appendFileSync(file, `${JSON.stringify(record)}\n`));
}

/** The records of a JSON-lines file (none when it is absent); a bad line is named by file:line. */
export function readJsonLines<T>(file: string): T[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l, i) => {
      try {
        return JSON.parse(l) as T;
      } catch {
        throw new Error(`${file}:${i + 1}: not a JSON line`);
      }
    });
}

export function readMetrics(runDir: string): MetricsRecord[] {
  return readJsonLines<MetricsRecord>(join(runDir, METRICS_FILE));
}

/** Keeps the first `lines` records (those of completed boundaries). */
export function truncateMetrics(runDir: string, lines: number): void {
  const file = join(runDir, METRICS_FILE);
  if (!existsSync(file)) return;
  const kept = readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .slice(0, lines);
  writeFileSync(file, kept.map((l) => `${l}\n`).join(''));
}

/** Appends episodes for inspection (not part of the resume bookkeeping: a replayed step may add its own again). */
export function appendEpisodes(runDir: string, tag: Record<string, unknown>, episodes: { reward?: number; episode: unknown }[]): void {
  if (episodes.length === 0) return;
  const file = join(runDir, EPISODES_FILE);
  writing(file, () => appendFileSync(file, episodes.map((e) => `${JSON.stringify({ ...tag, ...e })}\n`).join('')));
}
