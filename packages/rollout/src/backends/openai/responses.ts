/**
 * Shapes of OpenAI-compatible responses as vLLM returns them, and reading a completion
 * choice back into token ids and logprobs.
 */
import { z } from 'zod';
import type { Generation, Sampling } from '../types';

const completionChoiceSchema = z.object({
  text: z.string(),
  finish_reason: z.string().nullish(),
  /** vLLM with return_token_ids. */
  token_ids: z.array(z.number().int()).nullish(),
  logprobs: z
    .object({
      tokens: z.array(z.string()).nullish(),
      token_logprobs: z.array(z.number().nullable()).nullish(),
      top_logprobs: z.array(z.record(z.string(), z.number()).nullable()).nullish(),
    })
    .nullish(),
});

export const completionResponseSchema = z.object({ choices: z.array(completionChoiceSchema).min(1) });

export const chatResponseSchema = z.object({
  choices: z
    .array(
      z.object({
        message: z.object({
          content: z.string().nullish(),
          tool_calls: z
            .array(
              z.object({ id: z.string(), type: z.literal('function'), function: z.object({ name: z.string(), arguments: z.string() }) }),
            )
            .nullish(),
        }),
      }),
    )
    .min(1),
});

/** vLLM lists an adapter with the lora_path it was loaded from as `root`. */
export const modelsResponseSchema = z.object({ data: z.array(z.object({ id: z.string(), root: z.string().nullish() })) });

const TOKEN_ID = /^token_id:(\d+)$/;

export function readCompletionChoice(choice: z.infer<typeof completionChoiceSchema>, s: Sampling, promptTokens: number): Generation {
  const lp = choice.logprobs;
  const tokenIds =
    choice.token_ids ??
    lp?.tokens?.map((t) => {
      const m = TOKEN_ID.exec(t);
      if (!m)
        throw new Error(
          `completion token '${t}' is not 'token_id:N': the server must support return_token_ids or return_tokens_as_token_ids`,
        );
      return Number(m[1]);
    });
  if (!tokenIds) throw new Error('completion has no token ids: the server must support return_token_ids or return_tokens_as_token_ids');
  const logprobs = lp?.token_logprobs;
  if (!logprobs || logprobs.length !== tokenIds.length) {
    throw new Error(`completion has ${logprobs?.length ?? 'no'} logprobs for ${tokenIds.length} tokens`);
  }
  const gen: Generation = {
    tokenIds,
    logprobs: logprobs.map((x) => x ?? -Infinity),
    text: choice.text,
    // vLLM ends requests it stopped (a sleep in abort mode, a shutdown) with "abort".
    finishReason: choice.finish_reason === 'length' ? 'length' : choice.finish_reason === 'abort' ? 'abort' : 'stop',
    promptTokens,
  };
  if (s.top_logprobs > 0 && lp?.top_logprobs) {
    gen.topLogprobs = lp.top_logprobs.map((top) => {
      const m = new Map<number, number>();
      for (const [k, v] of Object.entries(top ?? {})) {
        const id = TOKEN_ID.exec(k);
        if (id) m.set(Number(id[1]), v);
      }
      return m;
    });
  }
  return gen;
}
