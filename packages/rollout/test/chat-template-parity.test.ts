/**
 * Chat-template parity with the reference library: for Qwen2.5 and Llama-3.2 (their exact
 * tokenizer files), conversations with and without a system prompt, with tools, tool calls, tool
 * results and several turns render to the same token ids in TypeScript as in transformers'
 * apply_chat_template(..., tokenize=True) on the same files (Llama's date header pinned). The
 * reference side is given the conversations in transformers' own message format, written out
 * here by hand (tool-call arguments as objects), not converted by the code under test.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ChatMessage, ToolSpec } from '@thinkfl/env';
import { ENGINE_PYTHON } from '../../trainer-ctl/src/engine';
import { fixtureModelDir } from '../fixtures/chat-models/assemble';
import { loadChatModel } from '../src/chat/index';

const DATE = '25 Nov 2026';

const tools: ToolSpec[] = [
  {
    name: 'search_traces',
    description: 'Child spans of a span.',
    parameters: { type: 'object', properties: { parent_span_id: { type: 'string' } }, required: ['parent_span_id'] },
  },
  {
    name: 'print_results',
    description: 'Final ranked root causes.',
    parameters: { type: 'object', properties: { root_causes: { type: 'array', items: { type: 'object' } } }, required: ['root_causes'] },
  },
];
const hfTools = [
  { type: 'function', function: { name: 'search_traces', description: 'Child spans of a span.', parameters: tools[0].parameters } },
  { type: 'function', function: { name: 'print_results', description: 'Final ranked root causes.', parameters: tools[1].parameters } },
];

interface Case {
  name: string;
  messages: ChatMessage[];
  hf: Record<string, unknown>[];
  tools: boolean;
  addGenerationPrompt: boolean;
}

const system = 'Find the root cause of the alert. Call one tool per turn.';
const user = 'Alert on ts-ui-dashboard at 2023-01-29 08:30:00; entry span s1.';
const args1 = { parent_span_id: 's1' };
const args2 = { parent_span_id: 's4' };
const answer = { root_causes: [{ service: 'ts-order-service', pod: 'ts-order-service-7d9f' }] };
const toolTurns: ChatMessage[] = [
  {
    role: 'assistant',
    content: '',
    tool_calls: [{ id: 'c1', type: 'function', function: { name: 'search_traces', arguments: JSON.stringify(args1) } }],
  },
  { role: 'tool', content: 's2 ts-travel-service 12 ms\ns4 ts-order-service 3021 ms ERROR', tool_call_id: 'c1', name: 'search_traces' },
  {
    role: 'assistant',
    content: '',
    tool_calls: [{ id: 'c2', type: 'function', function: { name: 'search_traces', arguments: JSON.stringify(args2) } }],
  },
  { role: 'tool', content: '(no child spans)', tool_call_id: 'c2', name: 'search_traces' },
];
const hfToolTurns = [
  { role: 'assistant', content: '', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'search_traces', arguments: args1 } }] },
  { role: 'tool', content: 's2 ts-travel-service 12 ms\ns4 ts-order-service 3021 ms ERROR', tool_call_id: 'c1', name: 'search_traces' },
  { role: 'assistant', content: '', tool_calls: [{ id: 'c2', type: 'function', function: { name: 'search_traces', arguments: args2 } }] },
  { role: 'tool', content: '(no child spans)', tool_call_id: 'c2', name: 'search_traces' },
];
const finalCall: ChatMessage = {
  role: 'assistant',
  content: '',
  tool_calls: [{ id: 'c3', type: 'function', function: { name: 'print_results', arguments: JSON.stringify(answer) } }],
};
const hfFinalCall = {
  role: 'assistant',
  content: '',
  tool_calls: [{ id: 'c3', type: 'function', function: { name: 'print_results', arguments: answer } }],
};

const CASES: Case[] = [
  {
    name: 'system prompt, tools, tool calls and results over several turns, finished episode',
    messages: [{ role: 'system', content: system }, { role: 'user', content: user }, ...toolTurns, finalCall],
    hf: [{ role: 'system', content: system }, { role: 'user', content: user }, ...hfToolTurns, hfFinalCall],
    tools: true,
    addGenerationPrompt: false,
  },
  {
    name: 'no system prompt, tools, mid-episode generation prompt',
    messages: [{ role: 'user', content: user }, ...toolTurns],
    hf: [{ role: 'user', content: user }, ...hfToolTurns],
    tools: true,
    addGenerationPrompt: true,
  },
  {
    name: 'system prompt, no tools, several plain turns',
    messages: [
      { role: 'system', content: system },
      { role: 'user', content: user },
      { role: 'assistant', content: 'The slowest child is s4 (ts-order-service).' },
      { role: 'user', content: 'Which pod?' },
    ],
    hf: [
      { role: 'system', content: system },
      { role: 'user', content: user },
      { role: 'assistant', content: 'The slowest child is s4 (ts-order-service).' },
      { role: 'user', content: 'Which pod?' },
    ],
    tools: false,
    addGenerationPrompt: true,
  },
  {
    name: 'no system prompt, no tools, one user turn',
    messages: [{ role: 'user', content: user }],
    hf: [{ role: 'user', content: user }],
    tools: false,
    addGenerationPrompt: true,
  },
];

describe.each(['qwen2.5-instruct', 'llama-3.2-instruct'] as const)('%s chat template', (name) => {
  it('renders every conversation to the token ids of transformers.apply_chat_template', () => {
    const dir = fixtureModelDir(name);
    const chat = loadChatModel(dir, { dateString: DATE });
    const ours = CASES.map((c) =>
      chat.tokenizer.encode(
        chat.template.render(c.messages, { tools: c.tools ? tools : undefined, addGenerationPrompt: c.addGenerationPrompt }),
      ),
    );
    const request = {
      dir,
      cases: CASES.map((c) => ({
        messages: c.hf,
        tools: c.tools ? hfTools : null,
        add_generation_prompt: c.addGenerationPrompt,
        date_string: DATE,
      })),
    };
    const out = execFileSync(ENGINE_PYTHON, [join(import.meta.dirname, 'hf_chat_tokens.py')], {
      input: JSON.stringify(request),
      encoding: 'utf8',
    });
    const theirs = JSON.parse(out) as number[][];
    CASES.forEach((c, i) => expect(ours[i], c.name).toEqual(theirs[i]));
    // The date is pinned on both sides (Llama prints it; Qwen has no date header).
    const text = chat.tokenizer.decode(theirs[0]);
    expect(text.includes(`Today Date: ${DATE}`)).toBe(name === 'llama-3.2-instruct');
  });
});
