/**
 * Train/eval split of a dataset's cases, as the run config's `dataset.split` describes it:
 * by fault (every case of a fault on one side, so evaluation never sees a fault trained on)
 * or by case. Deterministic in the seed and independent of the cases' order.
 */
import { type Case, Rng } from '@thinkfl/env';
import type { z } from 'zod';
import type { DatasetSection } from '../config/sections/dataset';

export type CaseSplitSettings = z.output<typeof DatasetSection>['split'];

export interface CaseSplit {
  train: Case[];
  eval: Case[];
}

/** Fisher-Yates with a seeded generator. */
function shuffle<T>(items: T[], seed: number): T[] {
  const out = [...items];
  const rng = new Rng(seed);
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(rng.next() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/**
 * Splits cases; `seed` is used when the settings name none (the run seed). A positive
 * eval_fraction holds out at least one unit and always leaves one for training when there
 * are two or more. Both sides keep the cases' input order.
 */
export function splitCases(cases: readonly Case[], split: CaseSplitSettings, seed: number): CaseSplit {
  const unitOf = (c: Case): string => (split.by === 'fault' ? c.fault_id : c.id);
  const units = [...new Set(cases.map(unitOf))].sort();
  let held = Math.round(split.eval_fraction * units.length);
  if (split.eval_fraction > 0 && units.length >= 2) held = Math.min(Math.max(held, 1), units.length - 1);
  const evalUnits = new Set(shuffle(units, split.seed ?? seed).slice(0, held));
  return {
    train: cases.filter((c) => !evalUnits.has(unitOf(c))),
    eval: cases.filter((c) => evalUnits.has(unitOf(c))),
  };
}
