/**
 * The one interface every generation backend implements: prompt token ids and sampling
 * settings in; generated token ids, their log-probabilities and text out. Token ids in and
 * out (never text) so the trainer sees exactly the tokens the policy produced.
 */
import { z } from 'zod';
import type { AssistantMessage, ChatMessage, ToolSpec } from '@thinkfl/env';
import { formatZodIssues } from '@thinkfl/env';

/** Sampling settings of one request, with the meanings OpenAI and vLLM give them. */
export const samplingSchema = z
  .object({
    /** Softmax temperature (logits / T). 0 means greedy decoding (argmax). Default 1. */
    temperature: z
      .number()
      .min(0)
      .max(100)
      .default(1)
      .describe('Softmax temperature (logits / T). 0 means greedy decoding (argmax). Default 1.'),
    /**
     * Nucleus sampling: sample only from the smallest set of most likely tokens whose
     * probability (after temperature) sums to at least top_p. In (0, 1]; 1 turns it off. Default 1.
     */
    top_p: z
      .number()
      .gt(0)
      .max(1)
      .default(1)
      .describe(
        'Nucleus sampling: sample only from the smallest set of most likely tokens whose probability (after temperature) sums to at least top_p. In (0, 1]; 1 turns it off. Default 1.',
      ),
    /** Most tokens to generate, end-of-sequence token included. Default 256. */
    max_tokens: z
      .number()
      .int()
      .positive()
      .default(256)
      .describe(
        "Most tokens to generate per request (one assistant turn), end-of-sequence token included; TRL's max_completion_length bounds a whole completion. Default 256.",
      ),
    /** Strings that end generation; the text is cut before the first one. Default none. */
    stop: z
      .array(z.string().min(1))
      .default([])
      .describe('Strings that end generation; the text is cut before the first one (OpenAI/vLLM stop). Default none.'),
    /**
     * Seed of the sampler: the same seed, prompt and model give the same tokens. Default: a
     * fresh random seed per request.
     */
    seed: z
      .number()
      .int()
      .min(0)
      .max(Number.MAX_SAFE_INTEGER)
      .optional()
      .describe('Seed of the sampler: the same seed, prompt and model give the same tokens. Default: a fresh random seed per request.'),
    /** How many most likely alternatives to report per generated token (0 to 20). Default 0. */
    top_logprobs: z
      .number()
      .int()
      .min(0)
      .max(20)
      .default(0)
      .describe('How many most likely alternatives to report per generated token (0 to 20). Default 0.'),
  })
  .strict();

export type SamplingInput = z.input<typeof samplingSchema>;
export type Sampling = z.output<typeof samplingSchema>;

export interface GenerationRequest {
  promptIds: number[];
  sampling?: SamplingInput;
  /** Stops this request's generation at the next decode step once aborted (nobody waits for it any more). */
  signal?: AbortSignal;
  /**
   * The policy version that must generate this request, for backends that hold several at
   * once (vllm); others generate with the one they hold. Default: the newest loaded.
   */
  policyVersion?: number;
  /** Called with each token as it is sampled, by backends that generate in process (serve streams from it). */
  onToken?: (tokenId: number, logprob: number) => void;
}

export interface Generation {
  /** Generated token ids; an end-of-sequence token that ended generation is included. */
  tokenIds: number[];
  /**
   * Log-probability of each generated token: log-softmax(logits / temperature) over the whole
   * vocabulary (greedy decoding reports temperature 1). With top_p 1 that is the distribution it
   * was sampled from, and vLLM's processed_logprobs; with top_p < 1 both renormalize over the
   * nucleus and it is not.
   */
  logprobs: number[];
  /** Per generated token, the most likely alternatives (token id -> logprob), when asked for. */
  topLogprobs?: Map<number, number>[];
  /** Decoded text without the end-of-sequence token, cut before a stop string. */
  text: string;
  /** 'stop': end-of-sequence token or stop string; 'length': maxTokens or the context length; 'abort': the request's signal. */
  finishReason: 'stop' | 'length' | 'abort';
  promptTokens: number;
}

export interface ChatRequest {
  messages: ChatMessage[];
  tools?: ToolSpec[];
  sampling?: SamplingInput;
}

export interface GenerationBackend {
  readonly name: string;
  /** Generates for every request; result i answers request i. */
  generate(requests: GenerationRequest[]): Promise<Generation[]>;
  /** Chat completion with tools (teacher models); absent where the backend has no chat template. */
  chat?(request: ChatRequest): Promise<AssistantMessage>;
  /** Loads policy version `version` from `source`; requests already running finish on the old one. */
  reload?(source: string, version?: number): Promise<void>;
  close(): Promise<void>;
}

/** A request a backend cannot serve as given (bad settings, prompt too long): the caller's mistake. */
export class GenerationInputError extends Error {}

/** Validates sampling settings, naming the offending field. */
export function resolveSampling(input: SamplingInput | undefined, where = 'sampling'): Sampling {
  const r = samplingSchema.safeParse(input ?? {});
  if (r.success) return r.data;
  throw new GenerationInputError(formatZodIssues(r.error, where));
}
