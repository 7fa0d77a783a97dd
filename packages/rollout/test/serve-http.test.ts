/**
 * The OpenAI-compatible server over the tiny model, in process and as `trainer-ctl serve`:
 * what each endpoint returns, and the 400s that name the bad field; vLLM's sleep mode endpoints
 * (issue 25).
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getTool, toolSpec } from '@thinkfl/env';
import { loadChatModel, type ChatModel } from '../src/chat/chat-model';
import { openLocalModel, startServer, type RunningServer, type ServedModel } from '../src/serve/index';
import { REPO_ROOT } from '../../../testkit/nezha';
import { scratchDir } from './backend-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';

const dir = scratchDir('serve');
let server: RunningServer;
let chat: ChatModel;
let closeModel: () => Promise<void>;
let served: ServedModel;

const post = async (path: string, body: unknown) => {
  const r = await fetch(server.url + path, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: r.status, json: (await r.json()) as Record<string, any> };
};

beforeAll(async () => {
  const modelDir = await createTinyModel(join(dir, 'tiny'), 4);
  chat = loadChatModel(modelDir);
  const model = await openLocalModel(modelDir, { id: 'tiny-test', threads: 1 });
  closeModel = () => model.close();
  served = model;
  server = await startServer(model, { port: 0 });
});
afterAll(async () => {
  await server.close();
  await closeModel();
});

describe('serve', () => {
  it('lists its model', async () => {
    const r = await fetch(`${server.url}/models`);
    expect(await r.json()).toMatchObject({ object: 'list', data: [{ id: 'tiny-test', object: 'model' }] });
  });

  it('completes a text prompt with its token ids, logprobs and alternatives', async () => {
    const prompt = 'ts-order-service search_traces';
    const { status, json } = await post('/completions', {
      prompt,
      max_tokens: 7,
      seed: 2,
      logprobs: 3,
      return_token_ids: true,
      return_tokens_as_token_ids: true,
    });
    expect(status).toBe(200);
    const c = json.choices[0];
    expect(c.prompt_token_ids).toEqual(chat.tokenizer.encode(prompt));
    expect(c.token_ids).toHaveLength(7);
    expect(c.finish_reason).toBe('length');
    expect(c.text).toBe(chat.tokenizer.decode(c.token_ids));
    expect(c.logprobs.tokens).toEqual(c.token_ids.map((id: number) => `token_id:${id}`));
    expect(c.logprobs.token_logprobs).toHaveLength(7);
    for (const top of c.logprobs.top_logprobs) expect(Object.keys(top)).toHaveLength(3);
    expect(json.usage).toEqual({
      prompt_tokens: c.prompt_token_ids.length,
      completion_tokens: 7,
      total_tokens: c.prompt_token_ids.length + 7,
    });
    const again = await post('/completions', { prompt: [c.prompt_token_ids], max_tokens: 7, seed: 2, logprobs: 0 });
    expect(again.json.choices[0].text).toBe(c.text);
    expect(again.json.choices[0].logprobs.tokens.join('')).toBe(c.text);
    const plain = await post('/completions', { prompt: [prompt], max_tokens: 3 });
    expect(plain.json.choices[0].logprobs).toBeNull();
  });

  it('cuts the text at a stop string', async () => {
    const free = (await post('/completions', { prompt: 'print_results', max_tokens: 12, temperature: 0 })).json.choices[0].text as string;
    const stop = free.slice(4, 7);
    const cut = (await post('/completions', { prompt: 'print_results', max_tokens: 12, temperature: 0, stop })).json.choices[0];
    expect(cut.finish_reason).toBe('stop');
    expect(cut.text).toBe(free.slice(0, free.indexOf(stop)));
  });

  it('renders chat messages and tools with the model chat template', async () => {
    const tools = [toolSpec(getTool('search_traces')!)];
    const messages = [{ role: 'user' as const, content: 'Which span is slow?' }];
    const body = { messages, tools: tools.map((t) => ({ type: 'function', function: t })), max_tokens: 5, seed: 1, return_token_ids: true };
    const { status, json } = await post('/chat/completions', body);
    expect(status).toBe(200);
    expect(json.prompt_token_ids).toEqual(chat.tokenizer.encode(chat.template.render(messages, { tools, addGenerationPrompt: true })));
    expect(chat.tokenizer.decode(json.prompt_token_ids)).toContain('"search_traces"');
    expect(json.choices[0].message.role).toBe('assistant');
    const none = await post('/chat/completions', { ...body, tool_choice: 'none' });
    expect(chat.tokenizer.decode(none.json.prompt_token_ids)).not.toContain('search_traces');
  });

  it.each([
    ['/completions', { max_tokens: 3 }, 'prompt'],
    ['/completions', { prompt: 'x', stream: 'yes' }, 'stream'],
    ['/completions', { prompt: 'x', n: 2 }, 'n'],
    ['/completions', { prompt: 'x', temperature: -1 }, 'temperature'],
    ['/completions', { prompt: [1, -3] }, 'prompt'],
    ['/completions', { prompt: [1, 10 ** 9] }, 'outside the vocabulary'],
    ['/chat/completions', { messages: [] }, 'messages'],
    ['/chat/completions', { messages: [{ role: 'robot', content: 'x' }] }, 'messages.0.role'],
    ['/chat/completions', { messages: [{ role: 'user', content: 'x' }], tool_choice: 'required' }, 'tool_choice'],
    ['/completions', '{"prompt": ', 'not valid JSON'],
  ])('answers POST %s %j with a 400 naming %s', async (path, body, names) => {
    const { status, json } = await post(path, body);
    expect(status).toBe(400);
    expect(json.error.type).toBe('invalid_request_error');
    expect(json.error.message).toContain(names);
  });

  it('answers unknown routes with 404 and wrong methods with 405', async () => {
    expect((await fetch(`${server.url}/embeddings`, { method: 'POST', body: '{}' })).status).toBe(404);
    expect((await fetch(`${server.url}/completions`)).status).toBe(405);
  });

  it('trainer-ctl serve refuses a directory that is not a model', () => {
    const cli = join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs');
    const r = spawnSync(process.execPath, [cli, 'serve', '--model', join(dir, 'nothing'), '--port', '0'], { encoding: 'utf8' });
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain(join(dir, 'nothing'));
  });

  it('answers a streamed request refused before its first token with an HTTP 429, not an event', async () => {
    const one = await startServer(served, { port: 0, maxConcurrent: 1, maxQueue: 0 });
    try {
      const busy = fetch(`${one.url}/completions`, {
        method: 'POST',
        body: JSON.stringify({ prompt: 'search_traces', max_tokens: 400, temperature: 0 }),
      });
      // The long request holds the only slot once the metrics say it runs.
      for (;;) {
        const m = await (await fetch(`${new URL(one.url).origin}/metrics`)).text();
        if (/thinkfl_generations_running 1/.test(m)) break;
        await new Promise((r) => setTimeout(r, 10));
      }
      const r = await fetch(`${one.url}/chat/completions`, {
        method: 'POST',
        body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], stream: true }),
      });
      expect(r.status).toBe(429);
      expect(r.headers.get('content-type')).toBe('application/json');
      expect(((await r.json()) as { error: { code: string } }).error.code).toBe('server_busy');
      expect((await busy).status).toBe(200);
    } finally {
      await one.close();
    }
  });
});

describe('serve in sleep mode', () => {
  it('answers /sleep, /is_sleeping and /wake_up as vLLM does: a request made while asleep waits for the wake-up', async () => {
    expect((await fetch(`${new URL(server.url).origin}/is_sleeping`)).status).toBe(404);
    const sleepy = await startServer(served, { port: 0, sleepMode: true, maxConcurrent: 1 });
    const origin = new URL(sleepy.url).origin;
    const call = async (method: string, path: string) => {
      const r = await fetch(origin + path, { method });
      return { status: r.status, json: (await r.json()) as Record<string, unknown> };
    };
    const gauge = async (name: string) =>
      Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(await (await fetch(`${origin}/metrics`)).text())?.[1]);
    try {
      expect(await call('GET', '/is_sleeping')).toEqual({ status: 200, json: { is_sleeping: false } });
      expect((await call('POST', '/sleep?level=2')).status).toBe(400);
      expect((await call('POST', '/sleep?mode=keep')).status).toBe(400);
      expect(await call('POST', '/sleep?level=1&mode=wait')).toEqual({ status: 200, json: { status: 'sleeping', level: 1 } });
      expect(await call('GET', '/is_sleeping')).toEqual({ status: 200, json: { is_sleeping: true } });
      expect((await fetch(`${origin}/health`)).status).toBe(200);
      let answered = false;
      const pending = fetch(`${sleepy.url}/completions`, {
        method: 'POST',
        body: JSON.stringify({ prompt: 'ts-order-service', max_tokens: 4, seed: 1 }),
      }).then(async (r) => {
        answered = true;
        return { status: r.status, json: (await r.json()) as Record<string, any> };
      });
      while ((await gauge('thinkfl_generations_waiting')) !== 1) await new Promise((r) => setTimeout(r, 20));
      // Queued behind the sleep, with no generation running: it cannot have been answered.
      expect([answered, await gauge('thinkfl_generations_running')]).toEqual([false, 0]);
      expect(await call('POST', '/wake_up')).toEqual({ status: 200, json: { status: 'awake', tags: null } });
      const done = await pending;
      expect(done.status).toBe(200);
      expect(done.json.usage.completion_tokens).toBeGreaterThan(0);
      expect([await gauge('thinkfl_sleeps_total'), await gauge('thinkfl_wake_ups_total'), await gauge('thinkfl_sleeping')]).toEqual([
        1, 1, 0,
      ]);
    } finally {
      await sleepy.close();
    }
  });
});
