/** Turns a registered policy into a Solve for evaluation: rankers answer directly, agents play a protocol. */
import { runEpisode } from '../episodes/run-episode';
import { parseEpisodeSettings } from '../episodes/settings';
import { getPolicy, parsePolicySettings } from '../policies';
import type { Dataset } from '../types';
import type { Solve } from './evaluate';

export interface SolverOptions {
  /** Settings of the policy (validated by its schema). An agent reads D_max from the episode it plays. */
  settings?: Record<string, unknown>;
  /** Episode protocol an agent policy plays. Default: the policy's own, else 'rot'. */
  protocol?: string;
  /** Episode settings (D_max, tools, tool settings) for agent policies. */
  episode?: Record<string, unknown>;
}

export function solverFor(dataset: Dataset, policy: string, opts: SolverOptions = {}): Solve {
  const def = getPolicy(policy);
  if (def.kind === 'ranker') {
    const ranker = def.create(dataset, parsePolicySettings(def, opts.settings));
    return async (c) => ({ answer: ranker.rank(c) });
  }
  const episode = parseEpisodeSettings(opts.episode ?? {});
  const agent = def.create(dataset, parsePolicySettings(def, opts.settings));
  return async (c) => {
    const record = await runEpisode({
      dataset,
      case: c,
      policy: agent,
      protocol: opts.protocol ?? def.protocol ?? 'rot',
      settings: episode,
    });
    return { answer: record.answer, episode: record };
  };
}
