/** Turns a registered policy into a Solve for evaluation. */
import { getPolicy, parsePolicySettings } from '../policies';
import type { Dataset } from '../types';
import type { Solve } from './evaluate';

export interface SolverOptions {
  /** Settings of the policy (validated by its schema). */
  settings?: unknown;
  /** Episode protocol an agent policy plays. Default 'rot'. */
  protocol?: string;
}

export function solverFor(dataset: Dataset, policy: string, opts: SolverOptions = {}): Solve {
  const def = getPolicy(policy);
  if (def.kind === 'ranker') {
    const ranker = def.create(dataset, parsePolicySettings(def, opts.settings));
    return async (c) => ({ answer: ranker.rank(c) });
  }
  throw new Error(`policy ${policy} is an agent: it needs an episode protocol`);
}
