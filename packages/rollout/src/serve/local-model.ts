/**
 * A model directory served locally: the `onnx` backend, the directory's tokenizer and chat
 * template, and the environment's tool-call parser reading calls out of generated text.
 */
import { randomUUID } from 'node:crypto';
import { basename, resolve } from 'node:path';
import { parseToolCalls, type OpenAIToolCall } from '@thinkfl/env';
import { loadChatModel } from '../chat/chat-model';
import { OnnxBackend, detokenizerOf, type OnnxSettings } from '../backends/onnx/index';
import type { ServedModel } from './served-model';

export interface LocalModelOptions extends Omit<OnnxSettings, 'modelDir'> {
  /** Name answered at /v1/models; default the directory's name. */
  id?: string;
}

export async function openLocalModel(modelDir: string, opts: LocalModelOptions = {}): Promise<ServedModel & { backend: OnnxBackend }> {
  const { id, ...backendOpts } = opts;
  const { tokenizer, template } = loadChatModel(modelDir);
  const backend = await OnnxBackend.create({ ...backendOpts, modelDir }, detokenizerOf(tokenizer));
  return {
    id: id ?? basename(resolve(modelDir)),
    backend,
    encode: (text) => tokenizer.encode(text),
    tokenText: (tokenId) => tokenizer.decode([tokenId]),
    chatPrompt: (messages, tools) => tokenizer.encode(template.render(messages, { tools, addGenerationPrompt: true })),
    readToolCalls: (text) => {
      const parsed = parseToolCalls({ content: text });
      if (!parsed.ok) return { content: text, toolCalls: [] };
      // As vLLM's tool parsers do: the content is what the model wrote before its first call.
      const first = parsed.calls[0];
      const cut = first.format === 'hermes' ? text.indexOf('<tool_call>') : text.indexOf(first.raw);
      const toolCalls: OpenAIToolCall[] = parsed.calls.map((c) => ({
        id: `call_${randomUUID().replaceAll('-', '').slice(0, 24)}`,
        type: 'function',
        function: { name: c.name, arguments: JSON.stringify(c.arguments) },
      }));
      return { content: cut >= 0 ? text.slice(0, cut).trim() : '', toolCalls };
    },
  };
}
