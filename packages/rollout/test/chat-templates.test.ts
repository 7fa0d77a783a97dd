import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ChatMessage, ToolSpec } from '@thinkfl/env';
import { fixtureModelDir, npmQwen3Dir } from '../fixtures/chat-models/assemble';
import { loadChatModel, loadModelDir, type ChatModel } from '../src/chat/index';

const tools: ToolSpec[] = [
  {
    name: 'search_traces',
    description: 'Child spans of a span.',
    parameters: { type: 'object', properties: { parent_span_id: { type: 'string' } }, required: ['parent_span_id'] },
  },
];

const conversation: ChatMessage[] = [
  { role: 'system', content: 'Find the root cause.' },
  { role: 'user', content: 'Entry span s1 of ts-ui-dashboard.' },
  {
    role: 'assistant',
    content: '',
    tool_calls: [{ id: 'c1', type: 'function', function: { name: 'search_traces', arguments: '{"parent_span_id": "s1"}' } }],
  },
  { role: 'tool', content: 's2 ts-order-service', tool_call_id: 'c1' },
];

let qwen: ChatModel;
let llama31: ChatModel;
let llama32: ChatModel;

beforeAll(() => {
  qwen = loadChatModel(fixtureModelDir('qwen2.5-instruct'));
  llama31 = loadChatModel(fixtureModelDir('llama-3.1-instruct'));
  llama32 = loadChatModel(fixtureModelDir('llama-3.2-instruct'));
});

describe('model directory', () => {
  it('names the missing or malformed file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'model-dir-'));
    expect(() => loadModelDir(join(dir, 'nope'))).toThrow(/does not exist/);
    expect(() => loadModelDir(dir)).toThrow(/tokenizer\.json/);
    writeFileSync(join(dir, 'tokenizer.json'), '{"model": {"type": "BPE"}}');
    writeFileSync(join(dir, 'tokenizer_config.json'), '{"eos_token": ');
    expect(() => loadModelDir(dir)).toThrow(/tokenizer_config\.json is not valid JSON/);
    writeFileSync(join(dir, 'tokenizer_config.json'), '{"eos_token": "</s>"}');
    expect(() => loadModelDir(dir)).toThrow(/no chat_template/);
    writeFileSync(join(dir, 'chat_template.jinja'), '{{ messages[0].content }}');
    expect(loadModelDir(dir).chatTemplate).toBe('{{ messages[0].content }}');
  });

  it('reads config.json when present', () => {
    const m = loadModelDir(fixtureModelDir('qwen2.5-instruct'));
    expect(m.config?.vocab_size).toBe(151936);
    const bare = mkdtempSync(join(tmpdir(), 'model-dir-'));
    mkdirSync(bare, { recursive: true });
    writeFileSync(join(bare, 'tokenizer.json'), '{"model": {"type": "BPE"}}');
    writeFileSync(join(bare, 'tokenizer_config.json'), '{"chat_template": "x"}');
    expect(loadModelDir(bare).config).toBeUndefined();
  });
});

describe('known encodings', () => {
  it('Qwen2.5 special tokens and ordinary text', () => {
    const t = qwen.tokenizer;
    expect(t.tokenId('<|endoftext|>')).toBe(151643);
    expect(t.tokenId('<|im_start|>')).toBe(151644);
    expect(t.tokenId('<|im_end|>')).toBe(151645);
    expect(t.tokenId('<tool_call>')).toBe(151657);
    expect(t.tokenId('</tool_call>')).toBe(151658);
    // The well-known default Qwen prompt prefix.
    expect(t.encode('<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n')).toEqual([
      151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645, 198, 151644, 872, 198,
    ]);
    expect(t.encode('Hello world')).toEqual([9707, 1879]);
  });

  it('Qwen2.5 lacks the tokens Qwen3 added; Qwen3 has them', () => {
    expect(qwen.tokenizer.tokenId('<tool_response>')).toBeUndefined();
    expect(qwen.tokenizer.encode('<tool_response>').length).toBeGreaterThan(1);
    const qwen3 = loadChatModel(npmQwen3Dir());
    expect(qwen3.tokenizer.encode('<tool_response>')).toEqual([151665]);
    expect(qwen3.tokenizer.encode('Hello world')).toEqual(qwen.tokenizer.encode('Hello world'));
  });

  it('Llama-3.1 special tokens and ordinary text', () => {
    const t = llama31.tokenizer;
    expect(t.tokenId('<|begin_of_text|>')).toBe(128000);
    expect(t.tokenId('<|end_of_text|>')).toBe(128001);
    expect(t.tokenId('<|start_header_id|>')).toBe(128006);
    expect(t.tokenId('<|end_header_id|>')).toBe(128007);
    expect(t.tokenId('<|eom_id|>')).toBe(128008);
    expect(t.tokenId('<|eot_id|>')).toBe(128009);
    expect(t.tokenId('<|python_tag|>')).toBe(128010);
    expect(t.encode('<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n')).toEqual([128000, 128006, 9125, 128007, 271]);
    expect(t.encode('<|start_header_id|>assistant<|end_header_id|>\n\n')).toEqual([128006, 78191, 128007, 271]);
    expect(t.encode('Hello world')).toEqual([9906, 1917]);
    // No BOS is added by encode: the template writes it.
    expect(t.encode('Hello')[0]).not.toBe(128000);
  });

  it('decode inverts encode on rendered conversations', () => {
    for (const m of [qwen, llama31, llama32]) {
      const text = m.template.render(conversation, { tools, addGenerationPrompt: true });
      expect(m.tokenizer.decode(m.tokenizer.encode(text))).toBe(text);
    }
  });
});

describe('rendering with tools, as the backbone template does', () => {
  it('Qwen2.5-Instruct', () => {
    const text = qwen.template.render(conversation, { tools, addGenerationPrompt: true });
    expect(text).toBe(
      '<|im_start|>system\nFind the root cause.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' +
        'You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n' +
        '{"type": "function", "function": {"name": "search_traces", "description": "Child spans of a span.", "parameters": ' +
        '{"type": "object", "properties": {"parent_span_id": {"type": "string"}}, "required": ["parent_span_id"]}}}\n</tools>\n\n' +
        'For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n' +
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' +
        '<|im_start|>user\nEntry span s1 of ts-ui-dashboard.<|im_end|>\n' +
        '<|im_start|>assistant\n<tool_call>\n{"name": "search_traces", "arguments": {"parent_span_id": "s1"}}\n</tool_call><|im_end|>\n' +
        '<|im_start|>user\n<tool_response>\ns2 ts-order-service\n</tool_response><|im_end|>\n' +
        '<|im_start|>assistant\n',
    );
  });

  it('Qwen2.5-Instruct without tools falls back to its default system prompt', () => {
    const text = qwen.template.render([{ role: 'user', content: 'hi' }], { addGenerationPrompt: false });
    expect(text).toBe(
      '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n',
    );
  });

  const llamaToolsBlock =
    'Given the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n' +
    'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.\n\n' +
    '{\n    "type": "function",\n    "function": {\n        "name": "search_traces",\n        "description": "Child spans of a span.",\n' +
    '        "parameters": {\n            "type": "object",\n            "properties": {\n                "parent_span_id": {\n' +
    '                    "type": "string"\n                }\n            },\n            "required": [\n                "parent_span_id"\n' +
    '            ]\n        }\n    }\n}\n\n';

  it('Llama-3.1 and 3.2 Instruct: tools in the first user turn, calls as JSON, results as ipython', () => {
    const expected =
      '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\n' +
      'Today Date: 26 Jul 2024\n\nFind the root cause.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n' +
      llamaToolsBlock +
      'Entry span s1 of ts-ui-dashboard.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n' +
      '{"name": "search_traces", "parameters": {"parent_span_id": "s1"}}<|eot_id|>' +
      // Python's Jinja treats a string as iterable, so the template JSON-quotes string results.
      '<|start_header_id|>ipython<|end_header_id|>\n\n"s2 ts-order-service"<|eot_id|>' +
      '<|start_header_id|>assistant<|end_header_id|>\n\n';
    expect(llama31.template.render(conversation, { tools, addGenerationPrompt: true })).toBe(expected);
    expect(llama32.template.render(conversation, { tools, addGenerationPrompt: true })).toBe(expected);
  });

  it('Llama templates print the configured date, never the clock', () => {
    const m = loadChatModel(fixtureModelDir('llama-3.2-instruct'), { dateString: '01 Jan 2025' });
    expect(m.template.render(conversation.slice(0, 2))).toContain('Today Date: 01 Jan 2025\n');
  });

  it('a malformed tool-call argument string is rendered, not thrown', () => {
    const bad: ChatMessage[] = [
      conversation[1],
      {
        role: 'assistant',
        content: '',
        tool_calls: [{ id: 'x', type: 'function', function: { name: 'search_traces', arguments: '{"parent' } }],
      },
    ];
    expect(qwen.template.render(bad, { tools })).toContain('"arguments": "{\\"parent"}');
  });
});
