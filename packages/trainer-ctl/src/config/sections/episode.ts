/** episode: the protocol and its settings (turn budget D_max, tools and their settings) from @thinkfl/env. */
import { EpisodeSettingsSchema, protocolNames } from '@thinkfl/env';
import { z } from 'zod';

export const EpisodeSection = EpisodeSettingsSchema.extend({
  protocol: z
    .string()
    .default('rot')
    .refine((p) => protocolNames().includes(p), {
      error: (iss) => `unknown protocol ${JSON.stringify(iss.input)} (known: ${protocolNames().join(', ')})`,
    })
    .describe(
      'Episode protocol by registry name: rot (ThinkFL recursion of thought, Algorithm 1), rclagent, knowledgemind (MCTS run by the environment), rcaflow (behaviour-tree workflow) or oracl (one tagged tool-free turn). Default rot.',
    ),
}).describe(
  'How an episode is played: protocol, d_max (ThinkFL D_max: tool turns before the forced answer, default 10, ' +
    'at most 20; also the D_max of the route grader, Eq. 10), turns_left_note, tools offered, tool_settings ' +
    '(packages/env EpisodeSettingsSchema).',
);
