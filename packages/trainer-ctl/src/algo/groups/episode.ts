/**
 * Whole-episode groups (ThinkFL; DeepSeekMath GRPO): the G samples of a group are G episodes of
 * the case from its start, so their rewards differ by everything each one chose.
 */
import type { EpisodeGroupsSettings } from '../../config/sections/groups';
import type { GroupKind } from './types';

export const episodeGroups: GroupKind<EpisodeGroupsSettings> = {
  name: 'episode',
  async play(samples, _settings, play) {
    return { trajectories: await play(samples), helperGroupIds: [] };
  },
};
