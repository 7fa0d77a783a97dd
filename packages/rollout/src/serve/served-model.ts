/** What the server needs from a model: a generation backend and its tokenizer, chat template and tool-call reader. */
import type { ChatMessage, OpenAIToolCall, ToolSpec } from '@thinkfl/env';
import type { GenerationBackend } from '../backends/types';

export interface ServedModel {
  /** Name the server lists at /v1/models and answers with. */
  readonly id: string;
  readonly backend: GenerationBackend;
  encode(text: string): number[];
  /** Text of one token, for logprob listings. */
  tokenText(id: number): string;
  /** Prompt token ids of a conversation rendered with the model's chat template, generation prompt added. */
  chatPrompt(messages: ChatMessage[], tools: ToolSpec[]): number[];
  /** Tool calls written in generated text, and the text left around them. */
  readToolCalls(text: string, tools: ToolSpec[]): { content: string; toolCalls: OpenAIToolCall[] };
}
