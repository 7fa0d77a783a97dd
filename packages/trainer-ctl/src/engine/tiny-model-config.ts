/**
 * Shape of the tiny CI model (engine/thinkfl_engine/tiny_model.py): a transformers LlamaForCausalLM
 * (or Qwen2ForCausalLM) whose config.json gets these keys; embedding_std only sets the random init.
 */
import { z } from 'zod';

export const TinyModelConfigSchema = z
  .object({
    /** transformers architecture (config.json model_type). Default llama. */
    architecture: z.enum(['llama', 'qwen2']).default('llama'),
    /** Tokens in the vocabulary; taken from the tokenizer.json the model is created with. */
    vocab_size: z.number().int().positive(),
    /** Width of the residual stream. Default 256. */
    hidden_size: z.number().int().positive().default(256),
    /** Decoder blocks. Default 4. */
    num_hidden_layers: z.number().int().positive().default(4),
    /** Query heads; num_attention_heads x head_dim is the attention width. Default 4. */
    num_attention_heads: z.number().int().positive().default(4),
    /** Key/value heads (GQA when fewer than query heads; must divide them). Default 4. */
    num_key_value_heads: z.number().int().positive().default(4),
    /** Width of one head; even, since RoPE rotates pairs. Default 64. */
    head_dim: z.number().int().positive().multipleOf(2).default(64),
    /** Width of the gated (SiLU) MLP. Default 512. */
    intermediate_size: z.number().int().positive().default(512),
    /** Longest sequence the model is meant for, in tokens (RoPE itself has no hard limit). Default 8192. */
    max_position_embeddings: z.number().int().positive().default(8192),
    /** RoPE base theta. Default 10000. */
    rope_theta: z.number().positive().default(10000),
    /** RMSNorm epsilon. Default 1e-6. */
    rms_norm_eps: z.number().positive().default(1e-6),
    /** Std of the random token embeddings; ~0.3 makes copying learnable quickly (notes/tiny-model.md). */
    embedding_std: z.number().positive().default(0.3),
    /** Special token ids from the tokenizer, recorded for generation. */
    bos_token_id: z.number().int().min(0).nullable().default(null),
    eos_token_id: z.number().int().min(0).nullable().default(null),
    pad_token_id: z.number().int().min(0).nullable().default(null),
  })
  .strict()
  .refine((c) => c.num_attention_heads % c.num_key_value_heads === 0, {
    message: 'num_attention_heads must be a multiple of num_key_value_heads',
    path: ['num_key_value_heads'],
  });

export type TinyModelConfig = z.infer<typeof TinyModelConfigSchema>;
export type TinyModelConfigInput = z.input<typeof TinyModelConfigSchema>;
