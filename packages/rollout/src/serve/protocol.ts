/**
 * Request bodies the server accepts, in OpenAI's field names (with vLLM's token-id
 * extensions). Unknown fields are ignored as OpenAI-compatible servers do; features this
 * server does not have (n > 1, echo, forced tool choice) are refused with a 400.
 */
import { z } from 'zod';
import { BadRequest } from './errors';
import { unpacked } from './json-thread';
import { formatZodIssue, zodIssuePath } from '@thinkfl/env';

const stop = z.union([z.string(), z.array(z.string())]).nullish();
const unsupported = (what: string) => ({ message: `${what} is not supported by this server` });

const sampling = {
  model: z.string().nullish(),
  max_tokens: z.number().int().positive().nullish(),
  temperature: z.number().min(0).max(100).nullish(),
  top_p: z.number().gt(0).max(1).nullish(),
  seed: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).nullish(),
  stop,
  n: z.literal(1, unsupported('n other than 1')).nullish(),
  /**
   * vLLM's other sampling fields, accepted at the values that turn them off (what the vllm
   * backend sends so that a server's generation_config defaults do not apply): this server has
   * no top-k, min-p or penalties, and answering as if it had would sample another distribution.
   */
  top_k: z.union([z.literal(0), z.literal(-1)], unsupported('top_k other than 0 or -1 (off)')).nullish(),
  min_p: z.literal(0, unsupported('min_p other than 0')).nullish(),
  repetition_penalty: z.literal(1, unsupported('repetition_penalty other than 1')).nullish(),
  presence_penalty: z.literal(0, unsupported('presence_penalty other than 0')).nullish(),
  frequency_penalty: z.literal(0, unsupported('frequency_penalty other than 0')).nullish(),
  /** Answer as server-sent events, chunk by chunk. */
  stream: z.boolean().nullish(),
  /** With stream: a last chunk carrying the usage. */
  stream_options: z.object({ include_usage: z.boolean().nullish() }).nullish(),
};

export const completionBodySchema = z.object({
  ...sampling,
  prompt: z.union([
    z.string(),
    z.array(z.number().int().min(0)).min(1),
    z.tuple([z.string()]),
    z.tuple([z.array(z.number().int().min(0)).min(1)]),
  ]),
  /** OpenAI: how many alternatives per token to return; the sampled token's logprob always comes with it. */
  logprobs: z.number().int().min(0).max(20).nullish(),
  echo: z.literal(false, unsupported('echo')).nullish(),
  /** vLLM: add token_ids and prompt_token_ids to each choice. */
  return_token_ids: z.boolean().nullish(),
  /** vLLM: logprob tokens as "token_id:N" instead of token text. */
  return_tokens_as_token_ids: z.boolean().nullish(),
});

export type CompletionBody = z.infer<typeof completionBodySchema>;

const text = z.union([z.string(), z.array(z.object({ type: z.literal('text'), text: z.string() }))]).nullish();

const toolCall = z.object({
  id: z.string(),
  type: z.literal('function'),
  function: z.object({ name: z.string(), arguments: z.string() }),
});

export const chatBodySchema = z.object({
  ...sampling,
  max_completion_tokens: z.number().int().positive().nullish(),
  messages: z
    .array(
      z.object({
        role: z.enum(['system', 'user', 'assistant', 'tool']),
        content: text,
        tool_calls: z.array(toolCall).nullish(),
        tool_call_id: z.string().nullish(),
        name: z.string().nullish(),
      }),
    )
    .min(1),
  tools: z
    .array(
      z.object({
        type: z.literal('function'),
        function: z.object({
          name: z.string().min(1),
          description: z.string().default(''),
          parameters: z.record(z.string(), z.unknown()).default({}),
        }),
      }),
    )
    .nullish(),
  tool_choice: z.enum(['auto', 'none'], unsupported('tool_choice other than "auto" or "none"')).nullish(),
  return_token_ids: z.boolean().nullish(),
});

export type ChatBody = z.infer<typeof chatBodySchema>;

/** The body validated against `schema`; a 400 naming the first bad field otherwise. */
export function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  const r = schema.safeParse(unpacked(body));
  if (r.success) return r.data;
  // One error names one param, as OpenAI's do: the first issue.
  const issue = r.error.issues[0];
  const param = zodIssuePath(issue);
  throw new BadRequest(formatZodIssue(issue, '', 'body'), param || undefined);
}

/** vLLM's POST /v1/load_lora_adapter; load_inplace replaces the weights of a name already loaded. */
export const loadAdapterSchema = z.object({
  lora_name: z.string().min(1),
  lora_path: z.string().min(1),
  load_inplace: z.boolean().nullish(),
});

/** vLLM's POST /v1/unload_lora_adapter. */
export const unloadAdapterSchema = z.object({ lora_name: z.string().min(1), lora_int_id: z.number().int().nullish() });
