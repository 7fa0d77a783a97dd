/** Optimizer settings of the train engine (AdamW; DeepSpeed gets the same values). Sent as-is to Python. */
import { z } from 'zod';

export const OptimizerSettingsSchema = z
  .object({
    /** Learning rate (per step; a request's `lr` overrides it, so the scheduler can live in TypeScript). Default 1e-5. */
    lr: z
      .number()
      .positive()
      .default(1e-5)
      .describe(
        'AdamW peak learning rate; each train request may carry its own lr, so schedules (SFT warm-up and decay) are computed in TypeScript. Default 1e-5.',
      ),
    /** AdamW decoupled weight decay. Default 0. */
    weight_decay: z
      .number()
      .min(0)
      .default(0)
      .describe("AdamW decoupled weight decay (Loshchilov & Hutter); TRL's weight_decay. Default 0."),
    /** AdamW (beta1, beta2). Default [0.9, 0.999]. */
    betas: z
      .tuple([z.number().min(0).lt(1), z.number().min(0).lt(1)])
      .default([0.9, 0.999])
      .describe("AdamW (beta1, beta2), decay rates of the moment estimates; TRL's adam_beta1/adam_beta2. Default [0.9, 0.999]."),
    /** AdamW epsilon. Default 1e-8. */
    eps: z.number().positive().default(1e-8).describe("AdamW epsilon added to the denominator; TRL's adam_epsilon. Default 1e-8."),
    /** Clip the global gradient L2 norm to this before the step; 0 disables clipping. Default 1.0. */
    max_grad_norm: z
      .number()
      .min(0)
      .default(1.0)
      .describe("Clip the global gradient L2 norm to this before each step; 0 disables clipping. TRL's max_grad_norm. Default 1.0."),
  })
  .strict();

export type OptimizerSettings = z.infer<typeof OptimizerSettingsSchema>;
