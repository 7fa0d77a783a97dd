/**
 * A model directory served locally: the `onnx` backend, the directory's tokenizer and chat
 * template, and the environment's tool-call parser reading calls out of generated text.
 */
import { randomUUID } from 'node:crypto';
import { basename, resolve } from 'node:path';
import { parseToolCalls, type OpenAIToolCall } from '@thinkfl/env';
import { loadChatModel } from '../chat/chat-model';
import { OnnxBackend, detokenizerOf, type OnnxSettings } from '../backends/onnx/index';
import { policyModelDir, readModelConfig } from '../backends/onnx/model';
import type { ServedModel } from './served-model';
import { TokenizerThread } from './tokenize-thread';

export interface LocalModelOptions extends Omit<OnnxSettings, 'model_dir'> {
  /** Name answered at /v1/models; default the directory's name. */
  id?: string;
}

/** Texts up to this many characters are tokenized in place: a few ms, less than a trip to the thread. */
const INLINE_CHARS = 16_384;

/** Opens a model directory, or a LoRA policy directory through the merged export beside its adapter. */
export async function openLocalModel(dir: string, opts: LocalModelOptions = {}): Promise<ServedModel & { backend: OnnxBackend }> {
  const { id, ...backendOpts } = opts;
  const modelDir = policyModelDir(dir);
  const { tokenizer, template } = loadChatModel(modelDir);
  const backend = await OnnxBackend.create({ ...backendOpts, model_dir: modelDir }, detokenizerOf(tokenizer));
  const thread = new TokenizerThread(modelDir);
  return {
    id: id ?? basename(resolve(dir)),
    backend,
    contextLength: readModelConfig(modelDir).maxPositions,
    maxCharsPerToken: tokenizer.maxCharsPerToken,
    encode: async (text, limit) => (text.length <= INLINE_CHARS ? tokenizer.encode(text) : thread.encode(text, limit)),
    tokenText: (tokenId) => tokenizer.decode([tokenId]),
    decode: (ids) => tokenizer.decode(ids),
    eosIds: backend.eosIds,
    renderChat: (messages, tools) => template.render(messages, { tools, addGenerationPrompt: true }),
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
    close: async () => {
      await thread.close();
      await backend.close();
    },
  };
}
