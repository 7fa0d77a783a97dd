/** stages: the three ThinkFL training stages, in order, each with its own length and extras. */
import { ExpertSettingsSchema } from '@thinkfl/env';
import { z } from 'zod';
import { OptimizerSettingsSchema } from '../../algo/core/optimizer-settings';
import { DetourSettingsSchema } from '@thinkfl/env';
import { RenameSettingsSchema } from '@thinkfl/env';
import { SftSettingsSchema } from '../../algo/sft/schedule';

/** The ThinkFL stages in the order they run. */
export const STAGE_NAMES = ['priming', 'exploration', 'refinement'] as const;
export type StageName = (typeof STAGE_NAMES)[number];

const enabled = z.boolean().default(true).describe('Run this stage. Default true.');
const steps = (def: number) =>
  z
    .number()
    .int()
    .min(0)
    .default(def)
    .describe(`GRPO steps of the stage; each step plays grpo.cases_per_step cases x grpo.group_size samples. Default ${def}.`);

export const StagesSection = z
  .strictObject({
    priming: z
      .strictObject({
        enabled,
        sft: z
          .strictObject({
            enabled: z.boolean().default(true).describe("Run SFT before the stage's GRPO steps. Default true."),
            conversations: z
              .number()
              .int()
              .positive()
              .default(300)
              .describe(
                'Teacher conversations to fine-tune on, only ones whose answer is correct ("a few hundred", ThinkFL stage 1). Default 300.',
              ),
            cases: z
              .enum(['run', 'train_faults'])
              .default('run')
              .describe(
                "Cases the teacher plays: run (the run's training cases, capped by dataset.max_cases_per_fault) or " +
                  'train_faults (every case of the training faults: more correct conversations under a small cap; ' +
                  'held-out faults stay unseen). Default run.',
              ),
            teacher: ExpertSettingsSchema.prefault({}).describe(
              'Settings of the scripted expert that plays the teacher conversations (max_answers, confirmations, ...); its turn budget is episode.d_max.',
            ),
            variants: z
              .number()
              .int()
              .positive()
              .default(1)
              .describe('Teacher conversations played per training case, each with its own detour seed. Default 1.'),
            detours: DetourSettingsSchema.prefault({ rate: 0 }).describe(
              'Detours in the teacher conversations (teacher-data/detours.ts): with chance rate an exploration turn becomes a ' +
                "mistake a small model makes, followed by its error observation and the expert's recovery; detour " +
                'turns are not trained on. Default rate 0 (off).',
            ),
            rename: RenameSettingsSchema.prefault({}).describe(
              'Consistent renaming of the teacher conversations (teacher-data/rename.ts): each correct conversation is replaced by ' +
                'copies renamed copies, each with its own random permutation of the service names applied everywhere in it ' +
                '(prompt, tool results, calls, answer; each pod by a pod of the new service), so that the answer can only be ' +
                'copied from the evidence, not remembered. Default copies 0 (original names).',
            ),
            reasoning: z
              .boolean()
              .default(true)
              .describe(
                "Keep the teacher's free text (the sentence before each call, the reasons in its answer). false trains " +
                  'on the calls and ranked components only: a tiny model learns the format from a fifth of the tokens. Default true.',
              ),
            answer_spans: z
              .boolean()
              .default(false)
              .describe(
                "Name each root cause of the teacher's answer by the span alias of its pod seen last in the conversation " +
                  '({"span": "s4"}, which print_results resolves to that span\'s service and pod) instead of by name: a tiny ' +
                  'model copies a span alias it has just called far more reliably than a service name. Default false.',
              ),
            answer_choice: z
              .enum(['teacher', 'random'])
              .default('teacher')
              .describe(
                "Which spans the teacher's answers name (with answer_spans). teacher: the expert's root causes, and only " +
                  'conversations whose answer is right are kept. random: as many spans as the expert answered, drawn at ' +
                  'random (seeded by run.seed) from the last search_traces result, and every conversation is kept: SFT ' +
                  'teaches the protocol but not which span to answer, so the choice is learnt from the GRPO reward alone. ' +
                  'Default teacher.',
              ),
            // The schedule (epochs, batch_size, warmup_steps, min_lr_ratio): algo/sft/schedule.ts's one SFT settings schema.
            ...SftSettingsSchema.shape,
            optimizer: OptimizerSettingsSchema.prefault({}).describe(
              'AdamW of the SFT updates (engine optimizer settings). Default lr 1e-5.',
            ),
            steps_per_update: z
              .number()
              .int()
              .positive()
              .default(1)
              .describe(
                'SFT optimizer steps per train job (update); each update is one metrics line and counts for ' +
                  'checkpoints.every_steps, and only the last exports the policy. More saves per-job overhead when steps ' +
                  'are short (the tiny model). Default 1.',
              ),
          })
          .refine((s) => s.answer_choice !== 'random' || s.answer_spans, {
            message: 'answer_choice random draws spans: it needs answer_spans: true',
            path: ['answer_choice'],
          })
          .prefault({})
          .describe('Supervised fine-tuning on teacher conversations before GRPO (ThinkFL stage 1).'),
        steps: steps(100),
      })
      .prefault({})
      .describe('Stage 1, format-aware policy priming: SFT, then GRPO with recall + format rewards at a higher temperature.'),
    exploration: z
      .strictObject({
        enabled,
        steps: steps(100),
        repeats: z
          .number()
          .int()
          .min(1)
          .default(4)
          .describe(
            "How many times each question is played across the stage's steps (ThinkFL guided exploration augmentation). Default 4.",
          ),
      })
      .prefault({})
      .describe('Stage 2, guided exploration augmentation: recall + diversity rewards, questions repeated across steps.'),
    refinement: z
      .strictObject({ enabled, steps: steps(100) })
      .prefault({})
      .describe('Stage 3, rank-oriented refinement: the multi-factor reward S = alpha*R + beta*P - gamma*H.'),
  })
  .describe("The three training stages, run in this order. Step counts are not published by ThinkFL; the defaults are this project's.");
