/**
 * The `openai` backend against `trainer-ctl serve` running the tiny model on a loopback port:
 * completions with token ids in and token ids + logprobs out (equal to the in-process onnx
 * backend), chat with tools from a model fine-tuned to call a tool on a real Nezha case, and
 * the client's retries, timeout and concurrency limit through real HTTP servers in between.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChatMessage, ToolSpec } from '@thinkfl/env';
import { OpenAIBackend, Semaphore, openBackend, openOnnxBackend } from '../src/backends/index';
import { loadChatModel } from '../src/chat/chat-model';
import { scratchDir, startServeProcess, toolCallerModel, type ServeProcess } from './backend-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';

const dir = scratchDir('openai');
let modelDir: string;
let serve: ServeProcess;
let tools: ToolSpec[];
let messages: ChatMessage[];
let entrySpanId: string;
let memorizedLoss: number;

beforeAll(async () => {
  const base = await createTinyModel(join(dir, 'base'), 3);
  ({ tools, messages, entrySpanId, dir: modelDir, loss: memorizedLoss } = await toolCallerModel(base, join(dir, 'tool-caller')));
  serve = await startServeProcess(modelDir);
});
afterAll(async () => {
  expect(await serve?.stop()).toBe(0);
});

describe('openai backend against trainer-ctl serve', () => {
  it('completes token ids into token ids and logprobs, as the onnx backend does in process', async () => {
    const remote = new OpenAIBackend({ base_url: serve.url });
    const local = await openOnnxBackend({ model_dir: modelDir });
    const chat = loadChatModel(modelDir);
    const reqs = [
      { promptIds: chat.tokenizer.encode(`search_traces ${entrySpanId}`), sampling: { seed: 11, max_tokens: 16, top_logprobs: 2 } },
      { promptIds: chat.tokenizer.encode('ts-order-service'), sampling: { temperature: 0, max_tokens: 8 } },
    ];
    const [got, want] = [await remote.generate(reqs), await local.generate(reqs)];
    got.forEach((g, i) => {
      expect(g.tokenIds).toEqual(want[i].tokenIds);
      expect(g.text).toBe(want[i].text);
      expect(g.finishReason).toBe(want[i].finishReason);
      expect(g.promptTokens).toBe(reqs[i].promptIds.length);
      g.logprobs.forEach((lp, t) => expect(lp).toBeCloseTo(want[i].logprobs[t], 5));
    });
    expect(got[0].topLogprobs!.map((m) => [...m.keys()])).toEqual(want[0].topLogprobs!.map((m) => [...m.keys()]));
    await local.close();
  });

  it('chats with tools: the tool call the model writes comes back as message.tool_calls', async () => {
    expect(memorizedLoss).toBeLessThan(0.05);
    const backend = await openBackend({ kind: 'openai', base_url: serve.url, model: 'tool-caller' });
    const msg = await backend.chat!({ messages, tools, sampling: { temperature: 0, max_tokens: 80 } });
    expect(msg.tool_calls).toHaveLength(1);
    const call = msg.tool_calls![0];
    expect(call).toMatchObject({ type: 'function', function: { name: 'search_traces' } });
    expect(call.id).toMatch(/^call_/);
    expect(JSON.parse(call.function.arguments)).toEqual({ parent_span_id: entrySpanId });
    expect(msg.content).toBe('');
  });

  it('chats without tools: the text comes back as content', async () => {
    const backend = new OpenAIBackend({ base_url: serve.url });
    const msg = await backend.chat({ messages: [{ role: 'user', content: 'ts-travel-service' }], sampling: { seed: 1, max_tokens: 6 } });
    expect(msg.tool_calls).toBeUndefined();
    expect(typeof msg.content).toBe('string');
  });

  it('retries 503s with backoff and gives up after the configured retries', async () => {
    const proxy = await startProxy(serve.url, (n) => (n <= 2 ? 503 : undefined));
    const req = [{ promptIds: [5, 6, 7], sampling: { seed: 1, max_tokens: 4 } }];
    const ok = await new OpenAIBackend({ base_url: proxy.url, model: 'tool-caller', retries: 2, backoff_ms: 1 }).generate(req);
    expect(ok[0].tokenIds).toHaveLength(4);
    expect(proxy.seen).toBe(3);
    proxy.seen = 0;
    await expect(new OpenAIBackend({ base_url: proxy.url, model: 'tool-caller', retries: 1, backoff_ms: 1 }).generate(req)).rejects.toThrow(
      /failed after 2 attempt\(s\): HTTP 503/,
    );
    await proxy.close();
  });

  it('does not retry a 400: the server names the bad field', async () => {
    const proxy = await startProxy(serve.url, () => undefined);
    const backend = new OpenAIBackend({ base_url: proxy.url, model: 'tool-caller', retries: 3, backoff_ms: 1 });
    await expect(backend.generate([{ promptIds: [1, 10 ** 9] }])).rejects.toThrow(/after 1 attempt\(s\): HTTP 400.*outside the vocabulary/);
    expect(proxy.seen).toBe(1);
    await proxy.close();
  });

  it('times out a request the server never answers', async () => {
    const silent = createServer(() => undefined);
    const url = await listen(silent);
    const backend = new OpenAIBackend({ base_url: url, model: 'tool-caller', timeout_ms: 200, retries: 1, backoff_ms: 1 });
    await expect(backend.generate([{ promptIds: [1] }])).rejects.toThrow(/after 2 attempt\(s\): timed out after 200 ms/);
    silent.closeAllConnections();
    silent.close();
  });

  it('keeps at most `concurrency` requests in flight', async () => {
    const proxy = await startProxy(serve.url, () => undefined);
    const backend = new OpenAIBackend({ base_url: proxy.url, concurrency: 2 });
    const out = await backend.generate(
      Array.from({ length: 6 }, (_, i) => ({ promptIds: [5, 6, 7 + i], sampling: { seed: i, max_tokens: 8 } })),
    );
    expect(out).toHaveLength(6);
    expect(proxy.maxInFlight).toBeGreaterThan(0);
    expect(proxy.maxInFlight).toBeLessThanOrEqual(2);
    expect(proxy.seen).toBe(7); // six completions and the /models lookup
    await proxy.close();
  });
});

describe('semaphore', () => {
  it('starts a third task only when one of two running tasks has finished', async () => {
    const gate = new Semaphore(2);
    const started: number[] = [];
    const finish: (() => void)[] = [];
    const task = (i: number) =>
      gate.run(
        () =>
          new Promise<number>((done) => {
            started.push(i);
            finish[i] = () => done(i);
          }),
      );
    const all = [task(0), task(1), task(2)];
    await Promise.resolve();
    expect(started).toEqual([0, 1]);
    finish[1]();
    await all[1];
    await Promise.resolve();
    expect(started).toEqual([0, 1, 2]);
    finish[0]();
    finish[2]();
    expect(await Promise.all(all)).toEqual([0, 1, 2]);
  });
});

interface Proxy {
  url: string;
  seen: number;
  maxInFlight: number;
  close(): Promise<void>;
}

/**
 * A real HTTP server in front of `trainer-ctl serve`: answers request n with the status
 * `fail(n)` returns, otherwise forwards it; counts requests and the most in flight at once.
 */
async function startProxy(target: string, fail: (n: number) => number | undefined): Promise<Proxy> {
  let inFlight = 0;
  const proxy: Proxy = { url: '', seen: 0, maxInFlight: 0, close: async () => undefined };
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    proxy.seen++;
    const status = fail(proxy.seen);
    if (status) {
      res.writeHead(status).end('{"error":{"message":"overloaded"}}');
      return;
    }
    inFlight++;
    proxy.maxInFlight = Math.max(proxy.maxInFlight, inFlight);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = chunks.length ? Buffer.concat(chunks) : undefined;
      const r = await fetch(target + req.url!.replace(/^\/v1/, ''), {
        method: req.method,
        body,
        headers: { 'content-type': 'application/json' },
      });
      const text = await r.text();
      inFlight--;
      res.writeHead(r.status, { 'content-type': 'application/json' }).end(text);
    });
  });
  proxy.url = `${await listen(server)}/v1`;
  proxy.close = () => new Promise((done) => server.close(() => done()));
  return proxy;
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
