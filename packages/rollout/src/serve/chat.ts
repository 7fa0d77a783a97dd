/**
 * POST /v1/chat/completions: messages and tools rendered with the model's chat template,
 * generated, and the tool calls in the generated text returned as message.tool_calls. Streamed
 * (`stream: true`), content arrives token by token when no tools are offered; with tools the
 * text is only known to be content or calls once it is complete, so it comes in the last
 * chunk, the calls as tool_calls deltas with their index.
 */
import { randomUUID } from 'node:crypto';
import type { ChatMessage, ToolSpec } from '@thinkfl/env';
import type { Generation } from '../backends/types';
import type { RequestContext } from './context';
import { chatBodySchema, parseBody, type ChatBody } from './protocol';
import { completionBudget, promptTokens } from './prompt';
import { samplingOf } from './sampling';
import { EventStream, TextDeltas } from './stream';

export async function chatCompletions(ctx: RequestContext, raw: unknown): Promise<Record<string, unknown> | EventStream> {
  const body = parseBody(chatBodySchema, raw);
  const model = ctx.model(body.model);
  const tools: ToolSpec[] = body.tool_choice === 'none' ? [] : (body.tools ?? []).map((t) => ({ ...t.function }));
  const promptIds = await promptTokens(model, model.renderChat(body.messages.map(toChatMessage), tools), 'messages');
  const asked = body.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens';
  const maxTokens = completionBudget(model, promptIds.length, body.max_completion_tokens ?? body.max_tokens, 512, asked);
  const sampling = samplingOf(body, maxTokens, 0);
  const head = { id: `chatcmpl-${randomUUID()}`, created: Math.floor(Date.now() / 1000), model: model.id };
  const usage = (gen: Generation) => ({
    prompt_tokens: promptIds.length,
    completion_tokens: gen.tokenIds.length,
    total_tokens: promptIds.length + gen.tokenIds.length,
  });
  const answer = (gen: Generation) => {
    const { content, toolCalls } = tools.length ? model.readToolCalls(gen.text, tools) : { content: gen.text, toolCalls: [] };
    return { content, toolCalls, finish: toolCalls.length ? 'tool_calls' : gen.finishReason };
  };

  if (body.stream) {
    return new EventStream(async (emit) => {
      const chunk = (delta: Record<string, unknown>, finish: string | null) =>
        emit({ ...head, object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] });
      // The first chunk waits for the first token: a refusal before it (429) is still answered as an HTTP status.
      let begun = false;
      const begin = () => {
        if (!begun) chunk({ role: 'assistant', content: '' }, null);
        begun = true;
      };
      const deltas = new TextDeltas(model.decode, (id) => model.eosIds.includes(id), sampling.stop ?? []);
      const gen = await ctx.generate(model, {
        promptIds,
        sampling,
        onToken: (id) => {
          begin();
          if (tools.length) return;
          const text = deltas.push(id);
          if (text) chunk({ content: text }, null);
        },
      });
      begin();
      const { content, toolCalls, finish } = answer(gen);
      const rest = tools.length ? content : deltas.finish(gen.text);
      if (rest) chunk({ content: rest }, null);
      if (toolCalls.length) chunk({ tool_calls: toolCalls.map((c, index) => ({ index, ...c })) }, null);
      chunk({}, finish);
      if (body.stream_options?.include_usage) emit({ ...head, object: 'chat.completion.chunk', choices: [], usage: usage(gen) });
    });
  }

  const gen = await ctx.generate(model, { promptIds, sampling });
  const { content, toolCalls, finish } = answer(gen);
  return {
    ...head,
    object: 'chat.completion',
    choices: [
      {
        index: 0,
        message: {
          role: 'assistant',
          content: content.length || !toolCalls.length ? content : null,
          ...(toolCalls.length ? { tool_calls: toolCalls } : {}),
        },
        finish_reason: finish,
        ...(body.return_token_ids ? { token_ids: gen.tokenIds } : {}),
      },
    ],
    ...(body.return_token_ids ? { prompt_token_ids: promptIds } : {}),
    usage: usage(gen),
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
