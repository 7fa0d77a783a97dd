/** Every grader by name. Adding a grader is adding its file and its line here. */
import { diversity } from './graders/diversity';
import { faultType } from './graders/fault-type';
import { format } from './graders/format';
import { hallucination } from './graders/hallucination';
import { multiFactor } from './graders/multi-factor';
import { recall } from './graders/recall';
import { reciprocalRank } from './graders/reciprocal-rank';
import { route } from './graders/route';
import { oraclTagFormat } from './oracl/format';
import { oraclLength } from './oracl/length';
import { oraclFBeta, oraclFnPenalty, oraclPodMatch, oraclResult, oraclTpBonus } from './oracl/rewards';
import { openrcaCorrect, openrcaScore } from './openrca/graders';
import type { Grader } from './types';

const ALL: Grader[] = [
  recall,
  reciprocalRank,
  route,
  hallucination,
  multiFactor,
  format,
  diversity,
  faultType,
  oraclPodMatch,
  oraclFBeta,
  oraclTpBonus,
  oraclFnPenalty,
  oraclResult,
  oraclTagFormat,
  oraclLength,
  openrcaScore,
  openrcaCorrect,
];

export const GRADERS: ReadonlyMap<string, Grader> = new Map(ALL.map((g) => [g.name, g]));

export function graderNames(): string[] {
  return [...GRADERS.keys()];
}

export function getGrader(name: string): Grader {
  const g = GRADERS.get(name);
  if (!g) throw new Error(`unknown grader '${name}' (known: ${graderNames().join(', ')})`);
  return g;
}
