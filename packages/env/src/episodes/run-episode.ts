/** Plays one episode of a case with a policy under a named protocol. */
import { Toolbox } from '../tools/toolbox';
import type { Case, Dataset, EpisodeRecord, Policy } from '../types';
import './builtin';
import { getProtocol, protocolNames } from './registry';
import { EpisodeSession } from './session';
import { parseEpisodeSettings, type EpisodeSettings } from './settings';

export interface RunEpisodeOptions {
  dataset: Dataset;
  case: Case;
  policy: Policy;
  /** Protocol name: 'rot' (default) or 'rclagent'. */
  protocol?: string;
  /** Episode settings (parsed) or their raw form. */
  settings?: EpisodeSettings | Record<string, unknown>;
}

/**
 * Never throws for anything the policy does (its throws end the episode with 'policy_error');
 * throws only for a configuration error: an unknown protocol, tool or bad settings.
 */
export async function runEpisode(opts: RunEpisodeOptions): Promise<EpisodeRecord> {
  const name = opts.protocol ?? 'rot';
  const protocol = getProtocol(name);
  if (!protocol) throw new Error(`unknown protocol "${name}" (known: ${protocolNames().join(', ')})`);
  const settings = parseEpisodeSettings(opts.settings ?? {});
  const toolbox = new Toolbox(opts.dataset, settings.tool_settings);
  toolbox.specs(settings.tools);
  const session = new EpisodeSession(opts.case, opts.policy, toolbox, settings.d_max);
  return protocol.play(session, settings);
}
