/**
 * A prompt's token ids and its completion budget, refused as early and as cheaply as possible
 * when they cannot fit the model's context: first a bound from the text's length (no
 * tokenization), then the real count; the messages name the numbers as vLLM's do.
 */
import { BadRequest, contextExceeded } from './errors';
import { TooManyTokens, type ServedModel } from './served-model';

const tooLong = (model: ServedModel, tokens: string, param: string) =>
  contextExceeded(
    `This model's maximum context length is ${model.contextLength} tokens. However, your request has ${tokens} input tokens. Please reduce the length of the input.`,
    param,
  );

/** Throws the 400 when a text of this length cannot leave room for one generated token, whatever its tokens. */
function boundText(model: ServedModel, text: string, param: string): void {
  const atLeast = Math.ceil(text.length / model.maxCharsPerToken);
  if (atLeast >= model.contextLength) throw tooLong(model, `at least ${atLeast}`, param);
}

/**
 * The length bounds of a completions prompt as it came in, before the body is validated
 * (validating millions of token ids costs more than refusing them): text by its length,
 * token ids by their count.
 */
export function boundRawPrompt(model: ServedModel, prompt: unknown): void {
  const one = Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] !== 'number' ? (prompt[0] as unknown) : prompt;
  if (typeof one === 'string') boundText(model, one, 'prompt');
  // Token ids may arrive packed in a Float64Array (json-thread.ts).
  else if ((Array.isArray(one) || one instanceof Float64Array) && one.length >= model.contextLength)
    throw tooLong(model, String(one.length), 'prompt');
}

/** Token ids of a prompt text; throws the 400 when it cannot leave room for one generated token. */
export async function promptTokens(model: ServedModel, text: string, param: string): Promise<number[]> {
  boundText(model, text, param);
  try {
    return checkedPrompt(model, await model.encode(text, model.contextLength - 1), param);
  } catch (e) {
    if (e instanceof TooManyTokens) throw tooLong(model, `at least ${e.atLeast}`, param);
    throw e;
  }
}

/** Prompt token ids given by the client, checked against the context. */
export function checkedPrompt(model: ServedModel, ids: number[], param: string): number[] {
  if (ids.length === 0) throw new BadRequest(`${param}: encodes to no tokens`, param);
  if (ids.length >= model.contextLength) throw tooLong(model, String(ids.length), param);
  return ids;
}

/**
 * Tokens the completion may have: the requested count, which must fit beside the prompt (a
 * 400 naming the numbers otherwise); unrequested, `fallback` cut to the room left.
 */
export function completionBudget(
  model: ServedModel,
  promptLength: number,
  requested: number | null | undefined,
  fallback: number,
  param: string,
): number {
  const room = model.contextLength - promptLength;
  if (requested == null) return Math.min(fallback, room);
  if (requested > room) {
    throw contextExceeded(
      `'${param}' is too large: ${requested}. This model's maximum context length is ${model.contextLength} tokens and your request has ${promptLength} input tokens (${requested} > ${model.contextLength} - ${promptLength}).`,
      param,
    );
  }
  return requested;
}
