/**
 * The cases a run trains and evaluates on: at most dataset.max_cases_per_fault per fault (in
 * dataset order), split by dataset.split (sft/split.ts, the same split the teacher data uses).
 */
import type { Case, Dataset } from '@thinkfl/env';
import type { RunConfig } from '../config/index';
import { splitCases, type CaseSplit } from '../sft/split';

function capPerFault(cases: Case[], max: number | undefined): Case[] {
  if (max === undefined) return cases;
  const seen = new Map<string, number>();
  return cases.filter((c) => {
    const n = seen.get(c.faultId) ?? 0;
    seen.set(c.faultId, n + 1);
    return n < max;
  });
}

export function runCases(dataset: Dataset, config: RunConfig): CaseSplit {
  return splitCases(capPerFault(dataset.cases, config.dataset.max_cases_per_fault), config.dataset.split, config.run.seed);
}
