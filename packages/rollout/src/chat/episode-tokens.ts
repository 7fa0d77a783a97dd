/**
 * An episode as token ids plus the mask of the tokens the model generated (1) versus the
 * prompt, tool results and template scaffolding (0). Ids are only ever appended, segment by
 * segment, so re-rendering a longer episode never changes earlier tokens; every render is
 * checked to extend the previous one, and a template that rewrites history is an error.
 */
import type { AssistantMessage, ChatMessage, ToolSpec } from '@thinkfl/env';
import type { ChatTemplate } from './template';
import type { Tokenizer } from './tokenizer';

export interface TokenizedEpisode {
  ids: number[];
  /** 1 where the model generated the token (its turns and their end-of-turn token), else 0. */
  mask: number[];
}

export interface EpisodeTokensOptions {
  tools?: readonly ToolSpec[];
  /** Text that closes an assistant turn; default the tokenizer's eos_token. */
  endOfTurn?: string;
}

/** A template whose render of messages[0..k] is not a prefix of its render of messages[0..k+1]. */
export class TemplatePrefixError extends Error {
  override name = 'TemplatePrefixError';
}

export class EpisodeTokens implements TokenizedEpisode {
  readonly ids: number[] = [];
  readonly mask: number[] = [];
  private readonly messages: ChatMessage[] = [];
  /** The rendered text the ids stand for. */
  private text = '';
  private awaitingAssistant = false;
  private readonly endOfTurn: string;
  private readonly endOfTurnId: number;

  constructor(
    private readonly template: ChatTemplate,
    private readonly tokenizer: Tokenizer,
    private readonly opts: EpisodeTokensOptions = {},
  ) {
    const eot = opts.endOfTurn ?? tokenizer.eosToken;
    if (!eot) throw new Error(`${tokenizer.modelDir.dir}: no eos_token in tokenizer_config.json and no endOfTurn given`);
    this.endOfTurn = eot;
    this.endOfTurnId = tokenizer.requireId(eot);
  }

  /**
   * Adds the messages that arrived since the last assistant turn (system, user, tool) and the
   * generation prompt; returns the whole episode's ids, which is what the model continues.
   */
  prompt(newMessages: readonly ChatMessage[]): number[] {
    if (this.awaitingAssistant) throw new Error('prompt() called twice without an assistant turn in between');
    for (const m of newMessages) {
      if (m.role === 'assistant') throw new Error('assistant turns go through appendAssistant or appendGenerated');
    }
    this.messages.push(...newMessages);
    const full = this.render(true);
    this.push(this.tokenizer.encode(full.slice(this.text.length)), 0);
    this.text = full;
    this.awaitingAssistant = true;
    return [...this.ids];
  }

  /** Text path: the assistant turn as the template renders it, encoded, all generated. */
  appendAssistant(message: AssistantMessage): void {
    this.push(this.tokenizer.encode(this.acceptAssistant(message)), 1);
  }

  /**
   * Token-in/token-out path: the backend's own ids are kept as they are. When generation
   * stopped before the end-of-turn token (length limit), that token is added, not trained on.
   */
  appendGenerated(ids: readonly number[], message: AssistantMessage): void {
    this.appendTurnIds(ids, message, 1);
  }

  /**
   * A turn another episode generated, continued here token for token (a branched group's shared
   * prefix): the same ids as appendGenerated, but context (mask 0), since this episode did not sample them.
   */
  appendReplayed(ids: readonly number[], message: AssistantMessage): void {
    this.appendTurnIds(ids, message, 0);
  }

  private appendTurnIds(ids: readonly number[], message: AssistantMessage, m: 0 | 1): void {
    this.acceptAssistant(message);
    this.push(ids, m);
    if (ids[ids.length - 1] !== this.endOfTurnId) this.push([this.endOfTurnId], 0);
  }

  /** Records the assistant message and returns its turn's text up to the end-of-turn token. */
  private acceptAssistant(message: AssistantMessage): string {
    if (!this.awaitingAssistant) throw new Error('an assistant turn needs a prompt() before it');
    const m: ChatMessage = { role: 'assistant', content: message.content };
    if (message.tool_calls && message.tool_calls.length > 0) m.tool_calls = message.tool_calls;
    this.messages.push(m);
    const full = this.render(false);
    const delta = full.slice(this.text.length);
    const at = delta.indexOf(this.endOfTurn);
    if (at < 0) {
      throw new Error(`the chat template did not end the assistant turn with ${this.endOfTurn}: ${JSON.stringify(delta.slice(0, 200))}`);
    }
    const turn = delta.slice(0, at + this.endOfTurn.length);
    this.text += turn;
    this.awaitingAssistant = false;
    return turn;
  }

  private render(addGenerationPrompt: boolean): string {
    const full = this.template.render(this.messages, { tools: this.opts.tools, addGenerationPrompt });
    if (!full.startsWith(this.text)) {
      let i = 0;
      while (i < this.text.length && full[i] === this.text[i]) i++;
      throw new TemplatePrefixError(
        `chat template is not prefix-stable: rendering ${this.messages.length} messages changes earlier text at ` +
          `character ${i}: was ${JSON.stringify(this.text.slice(i, i + 60))}, now ${JSON.stringify(full.slice(i, i + 60))}`,
      );
    }
    return full;
  }

  private push(ids: readonly number[], m: 0 | 1): void {
    for (const id of ids) {
      this.ids.push(id);
      this.mask.push(m);
    }
  }
}

/**
 * Tokenizes a finished episode's messages (as a protocol recorded them): every assistant
 * message counts as generated, everything else as context.
 */
export function tokenizeEpisode(
  messages: readonly ChatMessage[],
  template: ChatTemplate,
  tokenizer: Tokenizer,
  opts: EpisodeTokensOptions = {},
): TokenizedEpisode {
  const ep = new EpisodeTokens(template, tokenizer, opts);
  let pending: ChatMessage[] = [];
  for (const m of messages) {
    if (m.role !== 'assistant') {
      pending.push(m);
      continue;
    }
    ep.prompt(pending);
    pending = [];
    ep.appendAssistant({ content: m.content, tool_calls: m.tool_calls });
  }
  if (pending.length > 0) ep.prompt(pending);
  return { ids: [...ep.ids], mask: [...ep.mask] };
}
