/**
 * Teacher conversations as SFT samples: token ids of the conversation up to its last
 * assistant turn and a mask of the assistant tokens trained on (detour turns excluded).
 */
import type { TokenizedEpisode } from '@thinkfl/rollout';
import { EpisodeTokens, type ChatModel } from '@thinkfl/rollout';
import type { ChatMessage } from '@thinkfl/env';
import type { TeacherEpisode } from '@thinkfl/env';

export interface SftSampleOptions {
  /** Render the episode's tools into the prompt; must match the policy's `renderTools`. Default true. */
  renderTools?: boolean;
}

export function sftSample(ep: TeacherEpisode, chat: ChatModel, opts: SftSampleOptions = {}): TokenizedEpisode {
  const tokens = new EpisodeTokens(chat.template, chat.tokenizer, { tools: opts.renderTools === false ? [] : ep.tools });
  const untrained = new Set(ep.untrainedTurns);
  const skip: [number, number][] = [];
  let pending: ChatMessage[] = [];
  let turn = 0;
  for (const m of ep.record.messages) {
    if (m.role !== 'assistant') {
      pending.push(m);
      continue;
    }
    tokens.prompt(pending);
    pending = [];
    const from = tokens.ids.length;
    tokens.appendAssistant({ content: m.content, ...(m.tool_calls && { tool_calls: m.tool_calls }) });
    if (untrained.has(turn)) skip.push([from, tokens.ids.length]);
    turn++;
  }
  const mask = [...tokens.mask];
  for (const [from, to] of skip) mask.fill(0, from, to);
  return { ids: [...tokens.ids], mask };
}

/** Token counts of a sample set: all tokens and the trained (masked-in) ones. */
export function sampleTokens(samples: readonly TokenizedEpisode[]): { tokens: number; trained: number } {
  let tokens = 0;
  let trained = 0;
  for (const s of samples) {
    tokens += s.ids.length;
    for (const m of s.mask) trained += m;
  }
  return { tokens, trained };
}
