import { describe, expect, it } from 'vitest';
import { allJsonObjects, firstJsonObject, NO_CALL_ERROR, parseToolCalls } from '../src/parsing/index';
import type { AssistantMessage } from '../src/types';

const ok = (m: AssistantMessage | string) => {
  const r = parseToolCalls(typeof m === 'string' ? { content: m } : m);
  if (!r.ok) throw new Error(`expected a parse, got: ${r.error}`);
  return r.calls;
};
const err = (m: AssistantMessage | string) => {
  const r = parseToolCalls(typeof m === 'string' ? { content: m } : m);
  if (r.ok) throw new Error(`expected an error, got ${JSON.stringify(r.calls)}`);
  return r.error;
};

describe('Hermes', () => {
  it('reads a closed <tool_call> with reasoning around it', () => {
    const [c] = ok(
      'The gateway is slow.\n<tool_call>\n{"name": "search_traces", "arguments": {"parent_span_id": "a4424f20bffee416"}}\n</tool_call>',
    );
    expect(c).toMatchObject({ name: 'search_traces', format: 'hermes', arguments: { parent_span_id: 'a4424f20bffee416' } });
  });
  it('reads the unclosed <tool_call>{json}<tool_call> form of the published ThinkFL models', () => {
    const calls = ok('<tool_call>{"name": "search_traces", "arguments": {"parent_span_id": "x1"}}<tool_call>');
    expect(calls).toHaveLength(1);
    expect(calls[0].arguments).toEqual({ parent_span_id: 'x1' });
  });
  it('reads a call that runs to the end of the message without a closing tag', () => {
    expect(ok('<tool_call>{"name": "print_results", "arguments": {"root_causes": [{"pod": "p"}]}}')[0].name).toBe('print_results');
  });
  it('reads fenced JSON, "parameters", and arguments given as a JSON string', () => {
    expect(ok('<tool_call>```json\n{"name": "a", "parameters": {"k": 1}}\n```</tool_call>')[0].arguments).toEqual({ k: 1 });
    expect(ok('<tool_call>{"name": "a", "arguments": "{\\"k\\": 2}"}</tool_call>')[0].arguments).toEqual({ k: 2 });
  });
  it('reads several calls in order and skips empty tags', () => {
    const calls = ok(
      '<tool_call><tool_call>{"name": "a", "arguments": {}}</tool_call>\n<tool_call>{"name": "b", "arguments": {}}</tool_call>',
    );
    expect(calls.map((c) => c.name)).toEqual(['a', 'b']);
  });
  it('reports truncated JSON, an empty tag and a call without name', () => {
    expect(err('<tool_call>{"name": "search_traces", "arguments": {"parent_span_id": "ab')).toMatch(/not closed/);
    expect(err('<tool_call></tool_call>')).toMatch(/empty/);
    expect(err('<tool_call>{"arguments": {}}</tool_call>')).toMatch(/no "name"/);
    expect(err('<tool_call>{name: search_traces}</tool_call>')).toMatch(/invalid JSON/);
  });
  it('ignores calls written inside a closed <think> block', () => {
    expect(err('<think><tool_call>{"name": "a", "arguments": {}}</tool_call></think>I am done.')).toBe(NO_CALL_ERROR);
  });
});

describe('OpenAI tool_calls', () => {
  const tc = (name: unknown, args: unknown) => ({ id: 'call_1', type: 'function' as const, function: { name, arguments: args } as never });
  it('reads tool_calls and takes them before any text format', () => {
    const calls = ok({
      content: '<tool_call>{"name": "other", "arguments": {}}</tool_call>',
      tool_calls: [tc('search_traces', '{"parent_span_id": "s"}')],
    });
    expect(calls).toEqual([expect.objectContaining({ name: 'search_traces', format: 'openai', arguments: { parent_span_id: 's' } })]);
  });
  it('treats empty arguments as {} and reports bad JSON or a missing function', () => {
    expect(ok({ content: '', tool_calls: [tc('a', '')] })[0].arguments).toEqual({});
    expect(err({ content: '', tool_calls: [tc('a', '{"x": ')] })).toMatch(/not valid JSON/);
    expect(err({ content: '', tool_calls: [null as never] })).toMatch(/no function/);
    expect(err({ content: '', tool_calls: [tc(42, '{}')] })).toMatch(/no "name"/);
  });
});

describe('ReAct', () => {
  it('reads Action and Action Input lines, stopping at Observation', () => {
    const [c] = ok('Thought: check children\nAction: search_traces\nAction Input: {"parent_span_id": "s1"}\nObservation: pending');
    expect(c).toMatchObject({ name: 'search_traces', format: 'react', arguments: { parent_span_id: 's1' } });
  });
  it('strips quotes around the tool name and reads an empty input as {}', () => {
    expect(ok('Action: `print_results`\nAction Input:')[0]).toMatchObject({ name: 'print_results', arguments: {} });
  });
  it('reports a missing or non-JSON Action Input', () => {
    expect(err('Action: search_traces')).toMatch(/no "Action Input:"/);
    expect(err('Action: search_traces\nAction Input: s1')).toMatch(/JSON object/);
  });
});

describe('Llama-3 JSON', () => {
  it('reads a bare call, one after <|python_tag|>, and calls separated by ";"', () => {
    expect(ok('{"name": "search_traces", "parameters": {"parent_span_id": "s"}}')[0].format).toBe('llama3_json');
    expect(ok('<|python_tag|>{"name": "a", "parameters": {"k": "v"}}')[0].arguments).toEqual({ k: 'v' });
    expect(ok('{"name": "a", "parameters": {}}; {"name": "b", "parameters": {}}').map((c) => c.name)).toEqual(['a', 'b']);
  });
  it('reports JSON that is not a call', () => {
    expect(err('{"name": "a"')).toMatch(/expected a JSON call/);
    expect(err('<|python_tag|>{"tool": "a"}')).toMatch(/expected a JSON call/);
  });
});

describe('anything else', () => {
  it('is a format error, never a throw', () => {
    expect(err('The root cause is ts-order-service.')).toBe(NO_CALL_ERROR);
    expect(err({ content: undefined as never })).toBe(NO_CALL_ERROR);
    expect(err({ content: '', tool_calls: 'x' as never })).toBe(NO_CALL_ERROR);
    expect(err('{'.repeat(50_000))).toMatch(/expected a JSON call|no tool call/);
  });
});

describe('JSON scanning', () => {
  it('respects braces and escaped quotes inside strings', () => {
    const f = firstJsonObject('x {"a": "} \\" {", "b": {"c": 1}} y');
    expect(f.ok && f.value).toEqual({ a: '} " {', b: { c: 1 } });
  });
  it('skips unparsable brace runs and finds the objects after them', () => {
    expect(allJsonObjects('{bad} then {"ok": true}').values).toEqual([{ ok: true }]);
  });
});
