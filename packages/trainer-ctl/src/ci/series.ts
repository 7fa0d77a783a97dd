/**
 * A run directory's scalar series, by the names of logs/scalars.ts: every metrics.jsonl line
 * counted by state.json (x: its 1-based line number, the TensorBoard step) and every
 * eval-<name>.json (x: its order among the evaluations).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { STAGE_NAMES } from '../config/index';
import { readMetrics } from '../run-files/metrics-log';
import { readState } from '../run-files/state';
import { evalScalars, metricScalars, type EvalFigures } from '../logs/scalars';

export interface Point {
  x: number;
  y: number;
}

/** Evaluations in the order a run writes them. */
export const EVAL_NAMES: string[] = ['sft', ...STAGE_NAMES];

/** The eval-<name>.json files of a run directory, in run order. */
export function readEvals<T extends EvalFigures = EvalFigures>(runDir: string): T[] {
  return readdirSync(runDir)
    .filter((f) => /^eval-.+\.json$/.test(f))
    .map((f) => JSON.parse(readFileSync(join(runDir, f), 'utf8')) as T)
    .sort((a, b) => EVAL_NAMES.indexOf(a.name) - EVAL_NAMES.indexOf(b.name));
}

export function runSeries(runDir: string): Map<string, Point[]> {
  if (!existsSync(join(runDir, 'state.json'))) throw new Error(`${runDir}: no state.json (not a run directory)`);
  const counted = readState(runDir)?.metrics_lines;
  const series = new Map<string, Point[]>();
  const add = (x: number, values: Record<string, number>) => {
    for (const [tag, y] of Object.entries(values)) {
      const list = series.get(tag);
      if (list) list.push({ x, y });
      else series.set(tag, [{ x, y }]);
    }
  };
  readMetrics(runDir)
    .slice(0, counted)
    .forEach((m, i) => add(i + 1, metricScalars(m)));
  readEvals(runDir).forEach((e, i) => add(i + 1, evalScalars(e)));
  return series;
}
