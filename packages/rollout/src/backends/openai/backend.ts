/**
 * The `openai` backend: any OpenAI-compatible server. Token ids go in as the completions
 * prompt and come back with their logprobs the way vLLM serves them (`return_token_ids`, or
 * `return_tokens_as_token_ids` logprob tokens "token_id:N"); chat completions with tools
 * serve teacher models. The trainer takes these logprobs as those of the distribution that
 * sampled (temperature-scaled, before top-p): a vLLM policy server must run with
 * `--logprobs-mode processed_logprobs` (its default reports the raw distribution).
 */
import { z } from 'zod';
import { formatZodIssues, type AssistantMessage } from '@thinkfl/env';
import { JsonHttpClient } from './http';
import { completionResponseSchema, chatResponseSchema, modelsResponseSchema, readCompletionChoice } from './responses';
import {
  resolveSampling,
  type ChatRequest,
  type Generation,
  type GenerationBackend,
  type GenerationRequest,
  type Sampling,
} from '../types';

export const openaiSettingsSchema = z
  .object({
    /** Server root including the API prefix, e.g. http://127.0.0.1:8000/v1. */
    base_url: z.url().describe('Server root including the API prefix, e.g. http://127.0.0.1:8000/v1.'),
    /** Model name to ask for; default: the first model the server lists at /models. */
    model: z.string().min(1).optional().describe('Model name to ask for; default: the first model the server lists at /models.'),
    /** Environment variable holding the API key; no Authorization header when it is unset. Default OPENAI_API_KEY. */
    api_key_env: z
      .string()
      .min(1)
      .default('OPENAI_API_KEY')
      .describe('Environment variable holding the API key; no Authorization header when it is unset. Default OPENAI_API_KEY.'),
    /** Per-request timeout, milliseconds. Default 120000. */
    timeout_ms: z.number().int().positive().default(120_000).describe('Per-request timeout, milliseconds. Default 120000.'),
    /** Retries after a network error, 429 or 5xx (backoff doubles each time). Default 3. */
    retries: z
      .number()
      .int()
      .min(0)
      .default(3)
      .describe('Retries after a network error, 429 or 5xx (backoff doubles each time). Default 3.'),
    /** Wait before the first retry, milliseconds. Default 500. */
    backoff_ms: z.number().int().min(0).default(500).describe('Wait before the first retry, milliseconds. Default 500.'),
    /** Most requests in flight at once. Default 8. */
    concurrency: z.number().int().positive().default(8).describe('Most requests in flight at once. Default 8.'),
  })
  .strict();

export type OpenAISettings = z.input<typeof openaiSettingsSchema>;

export class OpenAIBackend implements GenerationBackend {
  readonly name = 'openai';
  private readonly http: JsonHttpClient;
  private model: Promise<string> | undefined;

  constructor(settings: OpenAISettings) {
    const s = openaiSettingsSchema.parse(settings);
    this.http = new JsonHttpClient({
      baseUrl: s.base_url,
      apiKey: process.env[s.api_key_env],
      timeoutMs: s.timeout_ms,
      retries: s.retries,
      backoffMs: s.backoff_ms,
      concurrency: s.concurrency,
    });
    if (s.model) this.model = Promise.resolve(s.model);
  }

  generate(requests: GenerationRequest[]): Promise<Generation[]> {
    return Promise.all(requests.map((r, i) => this.complete(r, i)));
  }

  async chat(request: ChatRequest): Promise<AssistantMessage> {
    const s = resolveSampling(request.sampling);
    const body = {
      model: await this.modelName(),
      messages: request.messages,
      ...(request.tools?.length ? { tools: request.tools.map((t) => ({ type: 'function', function: t })), tool_choice: 'auto' } : {}),
      ...samplingFields(s),
    };
    const res = parse(chatResponseSchema, await this.http.post('/chat/completions', body), 'chat completion');
    const msg = res.choices[0].message;
    return { content: msg.content ?? '', ...(msg.tool_calls?.length ? { tool_calls: msg.tool_calls } : {}) };
  }

  async close(): Promise<void> {}

  private async complete(request: GenerationRequest, index: number): Promise<Generation> {
    const s = resolveSampling(request.sampling, `requests[${index}].sampling`);
    const body = {
      model: await this.modelName(),
      prompt: request.promptIds,
      ...samplingFields(s),
      logprobs: Math.max(1, s.top_logprobs),
      return_token_ids: true,
      return_tokens_as_token_ids: true,
      skip_special_tokens: true,
    };
    const res = parse(completionResponseSchema, await this.http.post('/completions', body), 'completion');
    return readCompletionChoice(res.choices[0], s, request.promptIds.length);
  }

  private modelName(): Promise<string> {
    this.model ??= this.http.get('/models').then(
      (r) => {
        const first = parse(modelsResponseSchema, r, 'model list').data[0];
        if (!first) throw new Error('the server lists no models; set the backend model name');
        return first.id;
      },
      (e) => {
        // Ask again next time: the server may just not be up yet.
        this.model = undefined;
        throw e;
      },
    );
    return this.model;
  }
}

function samplingFields(s: Sampling): Record<string, unknown> {
  return {
    max_tokens: s.max_tokens,
    temperature: s.temperature,
    top_p: s.top_p,
    ...(s.stop.length ? { stop: s.stop } : {}),
    ...(s.seed !== undefined ? { seed: s.seed } : {}),
  };
}

function parse<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const r = schema.safeParse(value);
  if (!r.success) throw new Error(`unexpected ${what} response: ${formatZodIssues(r.error)}`);
  return r.data;
}
