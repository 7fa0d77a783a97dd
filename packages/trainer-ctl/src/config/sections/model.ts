/** model and tokenizer: which backbone, from a local directory or a Hugging Face hub id. */
import { z } from 'zod';

const HUB_ID = /^[A-Za-z0-9][\w.-]*\/[\w.-]+$/;

export const ModelSection = z
  .strictObject({
    hub_id: z
      .string()
      .regex(HUB_ID, 'a hub id is "<org>/<name>"')
      .optional()
      .describe(
        'Hugging Face hub id of the backbone (e.g. Qwen/Qwen2.5-3B-Instruct). Without dir the model lives in ' +
          '<cache_dir>/<org>--<name>, downloaded there when missing. Swapping the backbone is changing this line.',
      ),
    dir: z
      .string()
      .optional()
      .describe(
        'Local model directory (config.json, tokenizer.json, tokenizer_config.json, weights or onnx/model.onnx). ' +
          'Must exist when no hub_id is given. Default <cache_dir>/<org>--<name> of hub_id.',
      ),
    revision: z.string().min(1).default('main').describe('Hub revision (branch, tag or commit) of hub_id. Default main.'),
    cache_dir: z.string().default('.cache/models').describe('Where hub models are kept, one directory per model. Default .cache/models.'),
    dtype: z
      .enum(['float32', 'bfloat16', 'float16'])
      .default('bfloat16')
      .describe(
        'Compute precision of the train engine: forward and backward run under torch.autocast at this dtype, while ' +
          'parameters and optimizer state stay float32 master weights, so an update at lr 1e-6 is not rounded away. ' +
          'workers.train.autocast overrides it (e.g. auto on CPU). Default bfloat16 (ThinkFL backbones).',
      ),
    create_tiny: z
      .strictObject({
        seed: z.number().int().min(0).default(0).describe('Weight initialisation seed. Default 0.'),
        hidden_size: z.number().int().positive().optional().describe("Residual width. Default the script's (256)."),
        layers: z.number().int().positive().optional().describe("Decoder blocks. Default the script's (4)."),
        heads: z.number().int().positive().optional().describe("Query heads. Default the script's (4)."),
        kv_heads: z.number().int().positive().optional().describe('Key/value heads. Default as many as query heads.'),
        head_dim: z.number().int().positive().optional().describe("Width of one head. Default the script's (64)."),
        intermediate_size: z.number().int().positive().optional().describe("MLP width. Default the script's (512)."),
      })
      .optional()
      .describe(
        'Create the tiny CI model (scripts/create-tiny-model.ts: tokenizer fitted to the dataset, random weights, ' +
          'ONNX export) in dir when dir does not exist yet. Default none: dir must hold a model.',
      ),
    lora: z
      .strictObject({
        r: z.number().int().positive().describe('Rank of the adapter matrices B (out x r) and A (r x in). Required.'),
        alpha: z.number().positive().describe('Scale numerator: the update is (alpha / r) B A (Hu et al. 2021, eq. 3). Required.'),
        dropout: z.number().min(0).lt(1).default(0).describe('Dropout on the adapter input, probability. Default 0.'),
        target_modules: z
          .array(z.string().min(1))
          .min(1)
          .default(['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'])
          .refine((m) => !m.includes('lm_head'), { message: 'lm_head cannot be adapted (the output head is applied in chunks)' })
          .describe('Linear layers to adapt, by module name. Default all attention and MLP projections.'),
      })
      .optional()
      .describe(
        'Train LoRA adapters (PEFT) instead of all weights (counted by the memory estimate of `config validate`); ' +
          'the KL reference is a copy of the adapter weights (before any training: the base with adapters disabled). ' +
          'Checkpoints and weights exports hold the adapter alone; an ONNX export holds the adapter and the merged model ' +
          '(merged/). Default none: full fine-tuning.',
      ),
    max_context_tokens: z
      .number()
      .int()
      .positive()
      .default(8192)
      .describe('Longest episode (prompt, tool outputs and generated tokens), tokens; longer episodes end as no_answer. Default 8192.'),
    architecture: z
      .strictObject({
        hidden_size: z.number().int().positive().describe('Residual width (config.json hidden_size).'),
        layers: z.number().int().positive().describe('Decoder blocks (num_hidden_layers).'),
        heads: z.number().int().positive().describe('Query heads (num_attention_heads).'),
        kv_heads: z.number().int().positive().describe('Key/value heads (num_key_value_heads; grouped-query attention).'),
        head_dim: z.number().int().positive().describe('Width of one head (head_dim, else hidden_size / heads).'),
        intermediate_size: z.number().int().positive().describe('Width of the gated MLP (intermediate_size).'),
        vocab_size: z.number().int().positive().describe('Rows of the embedding and the output head (vocab_size).'),
        tie_word_embeddings: z.boolean().describe('The output head shares the embedding matrix (tie_word_embeddings).'),
        qkv_bias: z.boolean().describe('q_proj, k_proj and v_proj carry a bias (Qwen2: true; Llama: false).'),
      })
      .optional()
      .describe(
        'Shape of the backbone as its config.json publishes it, for the memory estimate of `trainer-ctl config ' +
          'validate` (packages/trainer-ctl/src/config/memory.ts); the engine reads the real config.json. Required ' +
          'with resources. Default none.',
      ),
  })
  .refine((m) => m.hub_id !== undefined || m.dir !== undefined, {
    message: 'give dir (a local model directory) or hub_id (a Hugging Face hub id)',
  })
  .transform((m) => ({ ...m, dir: m.dir ?? `${m.cache_dir}/${(m.hub_id as string).replace('/', '--')}` }))
  .describe('The backbone to fine-tune.');

export const TokenizerSection = z
  .strictObject({
    dir: z.string().optional().describe('Directory with tokenizer.json and tokenizer_config.json. Default the model directory.'),
    chat_template: z
      .string()
      .min(1)
      .default('auto')
      .describe(
        'Chat template: auto (the one in tokenizer_config.json), a built-in name of packages/rollout/src/chat, ' +
          'or a path to a .jinja file. Default auto.',
      ),
  })
  .describe('Tokenizer and chat template; text becomes tokens once, on the rollout side.');
