/** OpenAI request fields -> backend sampling settings. */
import type { SamplingInput } from '../backends/types';

interface SamplingFields {
  temperature?: number | null;
  top_p?: number | null;
  seed?: number | null;
  stop?: string | string[] | null;
}

/** Defaults are OpenAI's: temperature 1, top_p 1. */
export function samplingOf(body: SamplingFields, maxTokens: number, topLogprobs: number): SamplingInput {
  const stop = body.stop == null ? [] : typeof body.stop === 'string' ? [body.stop] : body.stop;
  return {
    temperature: body.temperature ?? 1,
    top_p: body.top_p ?? 1,
    max_tokens: maxTokens,
    stop: stop.filter((s) => s.length > 0),
    ...(body.seed != null ? { seed: body.seed } : {}),
    top_logprobs: topLogprobs,
  };
}
