/**
 * The cases a run trains and evaluates on: at most dataset.max_cases_per_fault per fault (in
 * dataset order), split by dataset.split (sft/split.ts, the same split the teacher data uses);
 * evaluation uses at most dataset.max_eval_cases of the held-out ones.
 */
import { spreadCases, type Case, type Dataset } from '@thinkfl/env';
import type { RunConfig } from '../config/index';
import { splitCases, type CaseSplit } from '../sft/split';

function capPerFault(cases: Case[], max: number | undefined): Case[] {
  if (max === undefined) return cases;
  const seen = new Map<string, number>();
  return cases.filter((c) => {
    const n = seen.get(c.fault_id) ?? 0;
    seen.set(c.fault_id, n + 1);
    return n < max;
  });
}

export function runCases(dataset: Dataset, config: RunConfig): CaseSplit {
  const split = splitCases(capPerFault(dataset.cases, config.dataset.max_cases_per_fault), config.dataset.split, config.run.seed);
  return { train: split.train, eval: spreadCases(split.eval, config.dataset.max_eval_cases) };
}
