/**
 * POST /v1/chat/completions: messages and tools rendered with the model's chat template,
 * generated, and the tool calls in the generated text returned as message.tool_calls.
 */
import { randomUUID } from 'node:crypto';
import type { ChatMessage, ToolSpec } from '@thinkfl/env';
import type { RequestContext } from './context';
import { chatBodySchema, parseBody, type ChatBody } from './protocol';
import { completionBudget, promptTokens } from './prompt';
import { samplingOf } from './sampling';

export async function chatCompletions(ctx: RequestContext, raw: unknown): Promise<Record<string, unknown>> {
  const body = parseBody(chatBodySchema, raw);
  const model = ctx.models.resolve(body.model);
  const tools: ToolSpec[] = body.tool_choice === 'none' ? [] : (body.tools ?? []).map((t) => ({ ...t.function }));
  const promptIds = await promptTokens(model, model.renderChat(body.messages.map(toChatMessage), tools), 'messages');
  const asked = body.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens';
  const maxTokens = completionBudget(model, promptIds.length, body.max_completion_tokens ?? body.max_tokens, 512, asked);
  const gen = await ctx.generate(model, { promptIds, sampling: samplingOf(body, maxTokens, 0) });
  const { content, toolCalls } = tools.length ? model.readToolCalls(gen.text, tools) : { content: gen.text, toolCalls: [] };
  return {
    id: `chatcmpl-${randomUUID()}`,
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model: model.id,
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: content.length || !toolCalls.length ? content : null, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) },
        finish_reason: toolCalls.length ? 'tool_calls' : gen.finishReason,
        ...(body.return_token_ids ? { token_ids: gen.tokenIds } : {}),
      },
    ],
    ...(body.return_token_ids ? { prompt_token_ids: promptIds } : {}),
    usage: { prompt_tokens: promptIds.length, completion_tokens: gen.tokenIds.length, total_tokens: promptIds.length + gen.tokenIds.length },
  };
}

function toChatMessage(m: ChatBody['messages'][number]): ChatMessage {
  const content = m.content == null ? '' : typeof m.content === 'string' ? m.content : m.content.map((p) => p.text).join('');
  return {
    role: m.role,
    content,
    ...(m.tool_calls?.length ? { tool_calls: m.tool_calls } : {}),
    ...(m.tool_call_id ? { tool_call_id: m.tool_call_id } : {}),
    ...(m.name ? { name: m.name } : {}),
  };
}
