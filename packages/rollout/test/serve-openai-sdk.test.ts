/**
 * The official `openai` Node SDK, unchanged, against `trainer-ctl serve` (issue 10, acceptance
 * 3): models.list lists exactly what is loaded, a policy loaded and unloaded at run time through
 * vLLM's LoRA endpoints, chat with tools (whole and streamed, the SDK assembling the streamed
 * tool call), streamed chat and completions whose deltas join into the whole answer, and
 * completions with log-probabilities.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI, { NotFoundError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatMessage, ToolSpec } from '@thinkfl/env';
import { postJson, scratchDir, startServeProcess, toolCallerModel, type ServeProcess } from './backend-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';

const dir = scratchDir('sdk');
let serve: ServeProcess;
let client: OpenAI;
let origin: string;
let toolCallerDir: string;
let tools: ToolSpec[];
let messages: ChatMessage[];
let entrySpanId: string;

const post = (path: string, body: unknown) => postJson(`${serve.url}${path}`, body);
const listed = async () => (await client.models.list()).data.map((m) => m.id);

beforeAll(async () => {
  const base = await createTinyModel(join(dir, 'base'), 3);
  const caller = await toolCallerModel(base, join(dir, 'tool-caller'));
  expect(caller.loss).toBeLessThan(0.05);
  ({ tools, messages, entrySpanId, dir: toolCallerDir } = caller);
  serve = await startServeProcess(base, ['--name', 'base', '--enable-lora']);
  origin = new URL(serve.url).origin;
  client = new OpenAI({ baseURL: serve.url, apiKey: 'unused', maxRetries: 0 });
}, 600_000);
afterAll(async () => {
  expect(await serve?.stop()).toBe(0);
});

const sdkTools = () => tools.map((t) => ({ type: 'function' as const, function: t }));
const sdkMessages = () => messages.map((m) => ({ role: m.role, content: m.content })) as OpenAI.Chat.ChatCompletionMessageParam[];

describe('the openai SDK against trainer-ctl serve', () => {
  it('answers /health, lists exactly what is loaded, and loads a policy by name and path as vLLM does', async () => {
    expect((await fetch(`${origin}/health`)).status).toBe(200);
    expect(await listed()).toEqual(['base']);
    const loaded = await post('/load_lora_adapter', { lora_name: 'tool-caller', lora_path: toolCallerDir });
    expect(loaded).toEqual({ status: 200, text: "Success: LoRA adapter 'tool-caller' added successfully." });
    expect((await post('/load_lora_adapter', { lora_name: 'tool-caller', lora_path: toolCallerDir })).status).toBe(400);
    const missing = await post('/load_lora_adapter', { lora_name: 'nowhere', lora_path: join(dir, 'nowhere') });
    expect(missing.status).toBe(400);
    expect(missing.text).toContain(join(dir, 'nowhere'));
    // A LoRA adapter alone (policy_format weights, for vLLM) has no merged export for the onnx backend: named, not served.
    const adapterOnly = join(dir, 'adapter-only');
    mkdirSync(adapterOnly);
    writeFileSync(join(adapterOnly, 'adapter_config.json'), JSON.stringify({ peft_type: 'LORA', r: 4, lora_alpha: 8 }));
    const refused = await post('/load_lora_adapter', { lora_name: 'adapter-only', lora_path: adapterOnly });
    expect(refused.status).toBe(400);
    expect(refused.text).toContain('is a LoRA adapter without its merged export in merged/');
    const models = (await client.models.list()).data as unknown as Record<string, unknown>[];
    expect(models.map((m) => [m.id, m.parent, m.root])).toEqual([
      ['base', null, 'base'],
      ['tool-caller', 'base', toolCallerDir],
    ]);
  });

  it('chats with tools: the memorized call comes back as tool_calls, whole and assembled from the stream', async () => {
    const req = { model: 'tool-caller', messages: sdkMessages(), tools: sdkTools(), temperature: 0, max_tokens: 80 };
    const whole = await client.chat.completions.create(req);
    const call = whole.choices[0].message.tool_calls![0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
    expect(whole.choices[0].finish_reason).toBe('tool_calls');
    expect(call.function.name).toBe('search_traces');
    expect(JSON.parse(call.function.arguments)).toEqual({ parent_span_id: entrySpanId });
    const streamed = await client.chat.completions.stream(req).finalChatCompletion();
    const got = streamed.choices[0].message.tool_calls![0] as OpenAI.Chat.ChatCompletionMessageFunctionToolCall;
    expect(got.function).toEqual(call.function);
    expect(streamed.choices[0].finish_reason).toBe('tool_calls');
  });

  it('streams chat content in pieces that join into the whole answer, usage last', async () => {
    const req = { model: 'base', messages: [{ role: 'user' as const, content: 'Which span is slow?' }], seed: 5, max_tokens: 24 };
    const whole = await client.chat.completions.create(req);
    const pieces: string[] = [];
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } })) {
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices[0];
      if (!choice) continue;
      if (choice.delta.content) pieces.push(choice.delta.content);
      finish = choice.finish_reason ?? finish;
    }
    expect(pieces.length).toBeGreaterThan(3);
    expect(pieces.join('')).toBe(whole.choices[0].message.content);
    expect(finish).toBe(whole.choices[0].finish_reason);
    expect(usage).toEqual(whole.usage);
  });

  it('streams completions cut at a stop string: the pieces never show the stop string and join into the whole text', async () => {
    const free = (await client.completions.create({ model: 'base', prompt: 'print_results', max_tokens: 20, temperature: 0 })).choices[0]
      .text;
    const stop = free.slice(6, 9);
    const whole = (await client.completions.create({ model: 'base', prompt: 'print_results', max_tokens: 20, temperature: 0, stop }))
      .choices[0];
    expect(whole.text).toBe(free.slice(0, free.indexOf(stop)));
    const pieces: string[] = [];
    for await (const chunk of await client.completions.create({
      model: 'base',
      prompt: 'print_results',
      max_tokens: 20,
      temperature: 0,
      stop,
      stream: true,
    })) {
      pieces.push(chunk.choices[0].text);
    }
    expect(pieces.filter(Boolean).length).toBeGreaterThan(1);
    expect(pieces.join('')).toBe(whole.text);
  });

  it('completes with log-probabilities: one per token, alternatives ranked, the sampled token among them when it is likelier', async () => {
    const r = await client.completions.create({ model: 'base', prompt: 'ts-order-service', max_tokens: 6, temperature: 0, logprobs: 3 });
    const lp = r.choices[0].logprobs!;
    expect(lp.tokens).toHaveLength(6);
    expect(lp.tokens!.join('')).toBe(r.choices[0].text);
    lp.token_logprobs!.forEach((x, i) => {
      expect(x).toBeLessThanOrEqual(0);
      const top = Object.entries(lp.top_logprobs![i]);
      expect(top).toHaveLength(3);
      // Greedy: the chosen token is the most likely one.
      expect(Math.max(...top.map(([, v]) => v))).toBeCloseTo(x, 5);
      expect(top.reduce((a, [, v]) => a + Math.exp(v), 0)).toBeLessThanOrEqual(1 + 1e-6);
    });
  });

  it('unloads a policy by name: no longer listed, requests for it are 404, the base model cannot be unloaded', async () => {
    expect(await post('/unload_lora_adapter', { lora_name: 'tool-caller' })).toEqual({
      status: 200,
      text: "Success: LoRA adapter 'tool-caller' removed successfully.",
    });
    expect(await listed()).toEqual(['base']);
    await expect(client.chat.completions.create({ model: 'tool-caller', messages: sdkMessages(), max_tokens: 2 })).rejects.toBeInstanceOf(
      NotFoundError,
    );
    expect((await post('/unload_lora_adapter', { lora_name: 'tool-caller' })).status).toBe(404);
    expect((await post('/unload_lora_adapter', { lora_name: 'base' })).status).toBe(400);
  });
});
