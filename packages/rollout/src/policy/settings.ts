/** Settings of a model policy: how each assistant turn is sampled and how long an episode may grow. */
import { z } from 'zod';

/** Turn indices a seed is spread over: every protocol has at most 20 tool turns plus one forced answer. */
export const SEED_TURN_SLOTS = 32;

export const ModelPolicySettingsSchema = z
  .object({
    /** Softmax temperature of every turn (logits / T); 0 is greedy decoding. Default 1. */
    temperature: z.number().min(0).max(100).default(1),
    /** Nucleus sampling mass in (0, 1]; 1 turns it off. Default 1. */
    topP: z.number().gt(0).max(1).default(1),
    /** Most tokens one assistant turn may generate, end-of-turn token included. Default 512. */
    maxTokens: z.number().int().positive().default(512),
    /**
     * Base seed of the episode: turn t samples with seed `seed * 32 + t`, so an episode is
     * reproducible and no two (episode, turn) pairs share a seed. Default: a fresh random seed per turn.
     */
    seed: z
      .number()
      .int()
      .min(0)
      .max(Math.floor(Number.MAX_SAFE_INTEGER / SEED_TURN_SLOTS))
      .optional(),
    /**
     * Render the offered tools into the prompt through the chat template (what tool-calling
     * backbones are trained on). false leaves them to the protocol's system prompt, which
     * lists them by name and description: ~1000 fewer tokens per episode for a tiny model.
     * Default true.
     */
    renderTools: z.boolean().default(true),
    /**
     * Longest episode in tokens (prompt plus generated); a turn whose prompt leaves no room ends
     * the episode. Default: the model's `max_position_embeddings` from config.json, else 8192.
     */
    maxContext: z.number().int().positive().optional(),
  })
  .strict();

export type ModelPolicySettingsInput = z.input<typeof ModelPolicySettingsSchema>;
export type ModelPolicySettings = z.output<typeof ModelPolicySettingsSchema>;

/** The sampler seed of one turn of an episode with base seed `base`. */
export function turnSeed(base: number, turn: number): number {
  if (!Number.isInteger(turn) || turn < 0 || turn >= SEED_TURN_SLOTS) throw new Error(`turn ${turn} is outside 0..${SEED_TURN_SLOTS - 1}`);
  return base * SEED_TURN_SLOTS + turn;
}
