/**
 * A Policy backed by a chat-completions endpoint (any OpenAI-compatible server: vLLM,
 * `trainer-ctl serve`, a hosted API): each turn sends the whole conversation and the tools the
 * protocol offers, and the reply (text and tool calls) is the turn. No tokenizer is needed on
 * this side, so any served model can be evaluated; training needs ModelPolicy's token ids.
 */
import type { AssistantMessage, Policy, PolicyContext } from '@thinkfl/env';
import type { GenerationBackend } from '../backends/types';

export interface ChatPolicySettings {
  /** Softmax temperature of every turn; 0 is greedy. */
  temperature: number;
  /** Most tokens one assistant turn may generate. */
  maxTokens: number;
}

export class ChatPolicy implements Policy {
  readonly name: string;

  constructor(
    private readonly backend: GenerationBackend,
    private readonly settings: ChatPolicySettings,
    name = 'chat',
  ) {
    if (!backend.chat) throw new Error(`backend ${backend.name} has no chat completions`);
    this.name = name;
  }

  next(ctx: PolicyContext): Promise<AssistantMessage> {
    return this.backend.chat!({
      messages: ctx.messages,
      tools: ctx.tools,
      sampling: { temperature: this.settings.temperature, max_tokens: this.settings.maxTokens },
    });
  }
}
