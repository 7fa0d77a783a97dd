/**
 * Groups that branch from a shared state (GiGPO's anchor states, arXiv 2505.10978; the tree
 * branching of TreeRL, arXiv 2506.11902, and ARPO, arXiv 2507.19849): the policy first plays the
 * case greedily once (the anchor); every sample of the group then replays the anchor's first b
 * turns token for token and samples its own turns from turn b on. Rewards within the group
 * differ only by what the samples chose after the branch point, and the replayed turns are
 * context (mask 0), so the loss trains only the tokens generated after it.
 */
import type { ChatMessage } from '@thinkfl/env';
import type { ReplayTurn } from '@thinkfl/rollout';
import type { RolloutJob } from '../../queue/jobs';
import type { BranchGroupsSettings } from '../../config/sections/groups';
import type { GroupKind } from './types';

/**
 * A played episode's first `branchTurn` assistant turns as a replay (ModelPolicy's `replay`):
 * each turn's token ids, cut from the episode's ids by its turn spans, and its text.
 */
export function replayTurns(
  ids: readonly number[],
  turns: readonly [number, number][],
  messages: readonly ChatMessage[],
  branchTurn: number,
  where: string,
): ReplayTurn[] {
  const texts = messages.filter((m) => m.role === 'assistant').map((m) => m.content);
  if (texts.length !== turns.length) throw new Error(`${where}: ${turns.length} turn spans for ${texts.length} assistant messages`);
  return turns.slice(0, branchTurn).map(([start, end], i) => ({ ids: ids.slice(start, end), text: texts[i] }));
}

/**
 * The turn a group branches at, for an anchor of `turnCount` assistant turns: its last turn for
 * `answer`, else turn `at` (0: the start, as whole-episode groups) or the last when it ended sooner.
 */
export function branchTurnOf(at: 'answer' | number, turnCount: number): number {
  const last = turnCount - 1;
  return Math.max(0, at === 'answer' ? last : Math.min(at, last));
}

/** The anchor of a group: its greedy episode, a group of one. */
export const anchorGroupId = (groupId: string) => `${groupId}-anchor`;

export const branchGroups: GroupKind<BranchGroupsSettings> = {
  name: 'branch',
  async play(samples, settings, play) {
    const first = samples[0];
    const anchorJob: RolloutJob = { ...first, group_id: anchorGroupId(first.group_id), sample_index: 0, temperature: 0 };
    const [anchor] = await play([anchorJob]);
    const where = `grpo.groups branch: anchor ${anchorJob.group_id} (case ${first.case_id})`;
    if (!anchor.turns) throw new Error(`${where} has no turn spans: only a model policy's trajectory can be branched`);
    const branchTurn = branchTurnOf(settings.at, anchor.turns.length);
    const prefix = replayTurns(anchor.ids, anchor.turns, anchor.episode.messages, branchTurn, where);
    const trajectories = await play(samples.map((j) => ({ ...j, prefix })));
    return { trajectories, branchTurn, helperGroupIds: [anchorJob.group_id] };
  },
};
