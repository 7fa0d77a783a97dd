/** What a group kind is given and gives back (registry.ts names the kinds). */
import type { RolloutJob, Trajectory } from '../../queue/jobs';

/** Plays rollout jobs: `jobs` are one group's (same groupId, sample indices 0..n-1); resolves with their trajectories in sample order. */
export type PlayGroup = (jobs: RolloutJob[]) => Promise<Trajectory[]>;

export interface PlayedGroup {
  /** The group's G trajectories in sample order: what is graded and trained. */
  trajectories: Trajectory[];
  /** The turn the samples branched at (the number of turns they share); absent for whole-episode groups. */
  branchTurn?: number;
  /** Ids of the further groups played to make this one (an anchor); dropped with it when the step is over. */
  helperGroupIds: string[];
}

export interface GroupKind<S extends { kind: string } = { kind: string }> {
  name: string;
  /** Plays one group whose samples, as whole episodes, would be `samples` (G jobs of one group id); `settings` are grpo.groups. */
  play(samples: RolloutJob[], settings: S, play: PlayGroup): Promise<PlayedGroup>;
}
