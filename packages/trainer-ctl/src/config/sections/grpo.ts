/** grpo: group size, advantages, the policy loss and the optimizer. */
import { z } from 'zod';
import { LossSettingsSchema } from '../../algo/core/loss-settings';
import { OptimizerSettingsSchema } from '../../algo/core/optimizer-settings';
import { AdvantageSettingsSchema } from '../../algo/core/advantages';
import { GroupsSchema } from './groups';

export const GrpoSection = z
  .strictObject({
    group_size: z
      .number()
      .int()
      .min(1)
      .default(8)
      .describe('G: samples per case; advantages are relative within these G (DeepSeekMath GRPO; 8 as in TRL num_generations). Default 8.'),
    cases_per_step: z
      .number()
      .int()
      .positive()
      .default(4)
      .describe('Distinct cases per GRPO step; a step trains on cases_per_step x group_size episodes. Default 4.'),
    groups: GroupsSchema.prefault({ kind: 'episode' }).describe(
      'How the G samples of a group are made, as { kind, ...settings } (packages/trainer-ctl/src/algo/groups). episode: G whole ' +
        'episodes of the case (ThinkFL, DeepSeekMath GRPO). branch: the policy plays the case greedily once (the anchor), ' +
        "and each sample replays the anchor's first turns token for token and samples its own from the branch point on " +
        '(`at`: the answer turn, or after k turns), so rewards within the group differ only by what was chosen after that ' +
        'shared state, and only the tokens generated after it are trained (GiGPO anchor states, arXiv 2505.10978; the ' +
        'branching of TreeRL, arXiv 2506.11902, and ARPO, arXiv 2507.19849). Default { kind: episode }.',
    ),
    advantage: AdvantageSettingsSchema.prefault({}),
    loss: LossSettingsSchema.prefault({}).describe(
      'Policy loss of the engine (clip eps_low/eps_high, KL kl_coef/kl_estimator, aggregation); ' +
        'packages/trainer-ctl/src/algo/core/loss-settings.ts. Presets: eps 0.2 (PPO), KL 0.001 with k3 (DeepSeekMath GRPO uses k3 at 0.04).',
    ),
    reference: z
      .enum(['grpo_start', 'stage_start'])
      .default('grpo_start')
      .describe(
        'The reference policy pi_ref of the KL term (kl_coef > 0; DeepSeekMath GRPO Eq. 3): a frozen copy of the ' +
          'policy taken by the train worker before the first GRPO update (grpo_start: after SFT, once per run) or ' +
          'before the first update of each stage (stage_start). Saved with every checkpoint and restored on resume, ' +
          'never re-taken from the weights the engine loads. Default grpo_start.',
      ),
    optimizer: OptimizerSettingsSchema.extend({
      lr: z.number().positive().default(1e-6).describe('AdamW learning rate of GRPO updates. Default 1e-6 (DeepSeekMath GRPO).'),
      reset: z
        .enum(['stage', 'grpo', 'never'])
        .default('stage')
        .describe(
          'When the train worker starts a new AdamW (no moments, step count 0) before a GRPO update: stage: before the ' +
            'first update of each GRPO stage; grpo: once, before the first GRPO update (after SFT); never: GRPO goes on ' +
            "with SFT's optimizer. Why: Adam's second moment carries the scale of SFT's cross-entropy gradients into RL, " +
            "which sizes RL's first steps by SFT's gradients instead of its own, and its first moment keeps pushing in " +
            "SFT's last direction; TRL, nanochat and prime-rl start RL with a new optimizer, and each ThinkFL " +
            'stage has its own reward. The reset is recorded in every checkpoint, so a resumed run neither repeats nor ' +
            'skips it. Default stage.',
        ),
    })
      .prefault({})
      .describe(
        'AdamW of the GRPO updates (lr, weight_decay, betas, eps, max_grad_norm) and when it starts anew (reset); packages/trainer-ctl/src/algo/core/optimizer-settings.ts.',
      ),
    max_refill_groups: z
      .number()
      .int()
      .min(0)
      .default(4)
      .describe(
        "When skip_equal_groups leaves groups out of a step, play at most this many further cases of the stage's " +
          'schedule to refill the batch (DAPO dynamic sampling, bounded so a step always ends). Default 4.',
      ),
    updates_per_batch: z
      .number()
      .int()
      .positive()
      .default(1)
      .describe('mu of GRPO: optimizer passes over one batch of episodes; the clip only acts when mu > 1. Default 1.'),
  })
  .describe('GRPO (Shao et al. 2024, DeepSeekMath).');
