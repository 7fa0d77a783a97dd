/** POST /v1/completions: prompt text or token ids in; text, token ids and logprobs out (vLLM's shape), whole or streamed. */
import { randomUUID } from 'node:crypto';
import type { Generation } from '../backends/types';
import type { RequestContext } from './context';
import { completionBodySchema, parseBody, type CompletionBody } from './protocol';
import { boundRawPrompt, checkedPrompt, completionBudget, promptTokens } from './prompt';
import type { ServedModel } from './served-model';
import { samplingOf } from './sampling';
import { EventStream, TextDeltas } from './stream';

export async function completions(ctx: RequestContext, raw: unknown): Promise<Record<string, unknown> | EventStream> {
  const fields = typeof raw === 'object' && raw !== null ? (raw as Record<string, unknown>) : {};
  const model = ctx.model(typeof fields.model === 'string' ? fields.model : undefined);
  boundRawPrompt(model, fields.prompt);
  const body = parseBody(completionBodySchema, raw);
  const prompt =
    Array.isArray(body.prompt) && body.prompt.length === 1 && typeof body.prompt[0] !== 'number' ? body.prompt[0] : body.prompt;
  const promptIds =
    typeof prompt === 'string' ? await promptTokens(model, prompt, 'prompt') : checkedPrompt(model, prompt as number[], 'prompt');
  const maxTokens = completionBudget(model, promptIds.length, body.max_tokens, 16, 'max_tokens');
  const sampling = samplingOf(body, maxTokens, body.logprobs ?? 0);
  const head = { id: `cmpl-${randomUUID()}`, object: 'text_completion', created: Math.floor(Date.now() / 1000), model: model.id };
  const usage = (gen: Generation) => ({
    prompt_tokens: promptIds.length,
    completion_tokens: gen.tokenIds.length,
    total_tokens: promptIds.length + gen.tokenIds.length,
  });
  if (body.stream) {
    return new EventStream(async (emit) => {
      const deltas = new TextDeltas(model.decode, (id) => model.eosIds.includes(id), sampling.stop ?? []);
      const perToken = body.logprobs != null || !!body.return_token_ids;
      let offset = 0;
      const gen = await ctx.generate(model, {
        promptIds,
        sampling,
        onToken: (id, logprob) => {
          const text = deltas.push(id);
          if (!text && !perToken) return;
          const logprobs =
            body.logprobs == null
              ? null
              : { tokens: [tokenName(model, body, id)], token_logprobs: [logprob], top_logprobs: null, text_offset: [offset] };
          offset += model.tokenText(id).length;
          emit({
            ...head,
            choices: [{ index: 0, text, logprobs, finish_reason: null, ...(body.return_token_ids ? { token_ids: [id] } : {}) }],
          });
        },
      });
      emit({ ...head, choices: [{ index: 0, text: deltas.finish(gen.text), logprobs: null, finish_reason: gen.finishReason }] });
      if (body.stream_options?.include_usage) emit({ ...head, choices: [], usage: usage(gen) });
    });
  }
  const gen = await ctx.generate(model, { promptIds, sampling });
  return {
    ...head,
    choices: [
      {
        index: 0,
        text: gen.text,
        finish_reason: gen.finishReason,
        logprobs: body.logprobs == null ? null : logprobsOf(model, gen, body),
        ...(body.return_token_ids ? { token_ids: gen.tokenIds, prompt_token_ids: promptIds } : {}),
      },
    ],
    usage: usage(gen),
  };
}

const tokenName = (model: ServedModel, body: CompletionBody, id: number) =>
  body.return_tokens_as_token_ids ? `token_id:${id}` : model.tokenText(id);

function logprobsOf(model: ServedModel, gen: Generation, body: CompletionBody): Record<string, unknown> {
  const name = (id: number) => tokenName(model, body, id);
  const offsets: number[] = [];
  let at = 0;
  for (const id of gen.tokenIds) {
    offsets.push(at);
    at += model.tokenText(id).length;
  }
  return {
    tokens: gen.tokenIds.map(name),
    token_logprobs: gen.logprobs,
    top_logprobs: gen.topLogprobs ? gen.topLogprobs.map((m) => Object.fromEntries([...m].map(([id, lp]) => [name(id), lp]))) : null,
    text_offset: offsets,
  };
}
