/** What the server needs from a model: a generation backend, its context, tokenizer, chat template and tool-call reader. */
import type { ChatMessage, OpenAIToolCall, ToolSpec } from '@thinkfl/env';
import type { GenerationBackend } from '../backends/types';

/** ServedModel.encode's refusal: the text has more tokens than the limit, at least `atLeast`. */
export class TooManyTokens extends Error {
  constructor(readonly atLeast: number) {
    super(`at least ${atLeast} tokens`);
  }
}

export interface ServedModel {
  /** Name the server lists at /v1/models and answers with. */
  readonly id: string;
  readonly backend: GenerationBackend;
  /** Positions the model attends to: prompt and completion tokens together. */
  readonly contextLength: number;
  /** Most characters of text one token stands for (Tokenizer.maxCharsPerToken): the cheap bound before tokenizing. */
  readonly maxCharsPerToken: number;
  /**
   * Token ids of text; a long text is tokenized off the event loop, and one with more than
   * `limit` tokens is refused with TooManyTokens before it is tokenized whole.
   */
  encode(text: string, limit?: number): Promise<number[]>;
  /** Text of one token, for logprob listings. */
  tokenText(id: number): string;
  /** Text of token ids (streamed text is decoded as it grows). */
  decode(ids: number[]): string;
  /** Token ids that end generation and are not part of the text. */
  readonly eosIds: readonly number[];
  /** A conversation rendered with the model's chat template, generation prompt added. */
  renderChat(messages: ChatMessage[], tools: ToolSpec[]): string;
  /** Tool calls written in generated text, and the text left around them. */
  readToolCalls(text: string, tools: ToolSpec[]): { content: string; toolCalls: OpenAIToolCall[] };
  /** Releases the backend and the tokenizer thread. */
  close(): Promise<void>;
}
