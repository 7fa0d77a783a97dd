/** What the server needs from a model: a generation backend, its context, tokenizer, chat template and tool-call reader. */
import type { ChatMessage, OpenAIToolCall, ToolSpec } from '@thinkfl/env';
import type { GenerationBackend } from '../backends/types';

export interface ServedModel {
  /** Name the server lists at /v1/models and answers with. */
  readonly id: string;
  readonly backend: GenerationBackend;
  /** Positions the model attends to: prompt and completion tokens together. */
  readonly contextLength: number;
  /** Most characters of text one token stands for (Tokenizer.maxCharsPerToken): the cheap bound before tokenizing. */
  readonly maxCharsPerToken: number;
  /** Token ids of text; a long text is tokenized off the event loop. */
  encode(text: string): Promise<number[]>;
  /** Text of one token, for logprob listings. */
  tokenText(id: number): string;
  /** A conversation rendered with the model's chat template, generation prompt added. */
  renderChat(messages: ChatMessage[], tools: ToolSpec[]): string;
  /** Tool calls written in generated text, and the text left around them. */
  readToolCalls(text: string, tools: ToolSpec[]): { content: string; toolCalls: OpenAIToolCall[] };
  /** Releases the backend and the tokenizer thread. */
  close(): Promise<void>;
}
