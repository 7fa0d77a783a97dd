/**
 * grpo.groups: each group kind's settings, { kind, ...settings }, and their union (the run
 * config's schema). Zod only, in the config's sections: the kinds (src/algo/groups/) import the config, not back.
 */
import { z } from 'zod';

export const episodeGroupsSchema = z.strictObject({
  kind: z.literal('episode').describe('G whole episodes of the case from its start (ThinkFL, DeepSeekMath GRPO).'),
});

export const branchGroupsSchema = z.strictObject({
  kind: z.literal('branch').describe('Samples continue one greedy prefix of the case (the anchor) and are trained after it only.'),
  at: z
    .union([z.literal('answer'), z.number().int().min(1)])
    .default('answer')
    .describe(
      "Where the samples branch off the anchor (the policy's greedy episode of the case). answer: at the anchor's last " +
        'turn, the one that gave (or was forced to give) its answer, so each sample answers once more from the same walk ' +
        "and only its answer turn onwards is trained. A number k (turns, >= 1): after the anchor's first k turns, or at its " +
        'last turn when it ended sooner. Default answer.',
    ),
});

export const GroupsSchema = z.discriminatedUnion('kind', [episodeGroupsSchema, branchGroupsSchema]);
export type GroupsSettings = z.infer<typeof GroupsSchema>;
export type EpisodeGroupsSettings = z.infer<typeof episodeGroupsSchema>;
export type BranchGroupsSettings = z.infer<typeof branchGroupsSchema>;
