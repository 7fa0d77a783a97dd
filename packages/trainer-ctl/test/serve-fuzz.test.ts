/**
 * Property test of `trainer-ctl serve` (issue 15): random JSON bodies (random values, and
 * valid requests with fields replaced by random values) and random bytes, small and over the
 * size parsed off the event loop, sent to every endpoint, from a seeded generator so a failure replays. No answer is a 5xx, the server
 * never dies, every error is in OpenAI's shape and every 200 is a completion.
 */
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readMetrics, startServe, type ServeProcess } from './serve-fixtures';
import { scratch } from './workers-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';
import { prng } from '../../../testkit/prng';

const SEED = 1515;
const CASES_PER_ENDPOINT = 120;
let dir: string;
let serve: ServeProcess;

beforeAll(async () => {
  dir = scratch('serve-fuzz');
  serve = await startServe(await createTinyModel(join(dir, 'model'), 5), ['--name', 'tiny', '--threads', '1']);
}, 300_000);
afterAll(async () => {
  await serve?.stop();
  rmSync(dir, { recursive: true, force: true });
});

const STRINGS = [
  '',
  'tiny',
  'gpt-99',
  'x',
  '<|im_start|>',
  '<tool_call>{"name": "search_traces"}</tool_call>',
  '\u0000',
  '\ud800',
  '🙂',
  'user',
  'assistant',
  'tool',
  'system',
  'function',
  'auto',
  'none',
  'required',
];
const NUMBERS = [0, 1, 2, -1, 0.5, 3, 20, 21, 100, 8192, 1e9, -1e9, 1e308, Number.MAX_SAFE_INTEGER, 2 ** 53 + 2];

function generator(seed: number) {
  const r = prng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
  const str = (): string =>
    r() < 0.6 ? pick(STRINGS) : Array.from({ length: Math.floor(r() * 40) }, () => String.fromCharCode(Math.floor(r() * 0x3000))).join('');
  const value = (depth = 0): unknown => {
    const k = Math.floor(r() * (depth > 2 ? 4 : 7));
    if (k === 0) return null;
    if (k === 1) return r() < 0.5;
    if (k === 2) return pick(NUMBERS);
    if (k === 3) return str();
    if (k === 4) return Array.from({ length: Math.floor(r() * 4) }, () => value(depth + 1));
    if (k === 5) return Array.from({ length: 1 + Math.floor(r() * 5) }, () => pick([0, 1, 5, 100, 2119, 2120, -3, 1.5]));
    return Object.fromEntries(
      Array.from({ length: Math.floor(r() * 4) }, () => [pick([str(), 'role', 'content', 'type', 'function', 'name']), value(depth + 1)]),
    );
  };
  // Valid requests (short generations), one or two fields then replaced, dropped or added.
  const completion = () => ({
    model: 'tiny',
    prompt: pick(['ts-order-service', 'search_traces', [5, 6, 7]]),
    max_tokens: pick([1, 2, 4]),
    temperature: pick([0, 1]),
    seed: 1,
  });
  const chat = () => ({
    model: 'tiny',
    messages: [{ role: 'user', content: 'Which span is slow?' }],
    tools: [
      { type: 'function', function: { name: 'search_traces', description: 'traces', parameters: { type: 'object', properties: {} } } },
    ],
    max_tokens: pick([1, 3]),
    seed: 2,
  });
  const FIELDS = [
    'model',
    'prompt',
    'messages',
    'tools',
    'tool_choice',
    'max_tokens',
    'max_completion_tokens',
    'temperature',
    'top_p',
    'seed',
    'stop',
    'n',
    'stream',
    'logprobs',
    'echo',
    'return_token_ids',
    'return_tokens_as_token_ids',
  ];
  const mutate = (body: Record<string, unknown>): Record<string, unknown> => {
    const out: Record<string, unknown> = { ...body };
    for (let i = 0; i < 1 + Math.floor(r() * 2); i++) {
      const f = pick(FIELDS);
      if (r() < 0.2) delete out[f];
      else
        out[f] =
          f === 'max_tokens' || f === 'max_completion_tokens' ? pick([...NUMBERS.filter((n) => n < 8 || n >= 8192), null, '3']) : value();
    }
    return out;
  };
  return {
    json: (kind: 'completion' | 'chat'): string => {
      const roll = r();
      if (roll < 0.2) return JSON.stringify(value());
      return JSON.stringify(mutate(kind === 'completion' ? completion() : chat()));
    },
    bytes: (): Uint8Array => Uint8Array.from({ length: Math.floor(r() * 600) }, () => Math.floor(r() * 256)),
    /** Over 256 KiB, so parsed on the server's JSON thread: random bytes, or a body whose 5000 token ids come back packed. */
    big: (kind: 'completion' | 'chat'): string | Uint8Array => {
      if (r() < 0.5) return Uint8Array.from({ length: 300_000 + Math.floor(r() * 300_000) }, () => Math.floor(r() * 256));
      const ids = Array.from({ length: 5000 }, () => Math.floor(r() * 2200));
      const base = kind === 'completion' ? completion() : chat();
      return JSON.stringify(mutate({ ...base, prompt: r() < 0.5 ? ids : [ids], pad: 'x'.repeat(300_000) }));
    },
    pick,
  };
}

function expectOpenAIError(status: number, text: string, what: string): void {
  let body: { error?: Record<string, unknown> };
  try {
    body = JSON.parse(text);
  } catch {
    throw new Error(`${what}: status ${status} with a body that is not JSON: ${text.slice(0, 200)}`);
  }
  expect(body, what).toEqual({
    error: {
      message: expect.any(String),
      type: expect.any(String),
      param: body.error && typeof body.error.param === 'string' ? expect.any(String) : null,
      code: body.error && typeof body.error.code === 'string' ? expect.any(String) : null,
    },
  });
  expect((body.error!.message as string).length, what).toBeGreaterThan(0);
}

const ENDPOINTS = [
  ['POST', '/v1/completions'],
  ['POST', '/v1/chat/completions'],
  ['GET', '/v1/models'],
  ['POST', '/v1/models'],
  ['GET', '/metrics'],
  ['POST', '/metrics'],
  ['POST', '/v1/embeddings'],
  ['GET', '/v1/completions'],
  ['POST', '/v1/load_lora_adapter'],
  ['POST', '/v1/unload_lora_adapter'],
  ['GET', '/health'],
] as const;

/** A streamed answer: JSON chunks of the served model, then [DONE]; an error event ends it early. */
function expectEventStream(text: string, what: string): void {
  const events = text.split('\n\n').filter(Boolean);
  expect(
    events.every((e) => e.startsWith('data: ')),
    what,
  ).toBe(true);
  const last = events[events.length - 1];
  const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)));
  if (last !== 'data: [DONE]') {
    expect(JSON.parse(last.slice(6)).error, what).toBeDefined();
    return;
  }
  for (const c of chunks) expect(c.model, what).toBe('tiny');
}

describe('trainer-ctl serve under random input', () => {
  it.each(ENDPOINTS)(
    '%s %s: random JSON and random bytes get no 5xx, errors in OpenAI shape',
    async (method, path) => {
      const gen = generator(SEED + path.length * 31 + method.length);
      const kind = path.includes('chat') ? 'chat' : 'completion';
      const bodies: { body: string | Uint8Array; label: string }[] = [];
      for (let i = 0; i < CASES_PER_ENDPOINT; i++) {
        const body = i % 20 === 19 ? gen.big(kind) : i % 4 === 3 ? gen.bytes() : gen.json(kind);
        bodies.push({
          body,
          label: `${method} ${path} case ${i}: ${typeof body === 'string' ? body.slice(0, 300) : `${body.length} random bytes`}`,
        });
      }
      const statuses: number[] = [];
      // Eight at a time: the generation queue is exercised too.
      for (let i = 0; i < bodies.length; i += 8) {
        await Promise.all(
          bodies.slice(i, i + 8).map(async ({ body, label }) => {
            const r = await fetch(serve.origin + path, {
              method,
              ...(method === 'POST' ? { body, headers: { 'content-type': 'application/json' } } : {}),
            });
            const text = await r.text();
            statuses.push(r.status);
            expect(r.status, label).toBeLessThan(500);
            if (r.status !== 200) return expectOpenAIError(r.status, text, label);
            if (path === '/metrics') return expect(text).toContain('thinkfl_generations_running');
            if (path === '/health') return expect(text).toBe('');
            if (r.headers.get('content-type') === 'text/event-stream') return expectEventStream(text, label);
            const json = JSON.parse(text);
            if (path === '/v1/models') return expect(json.data.map((m: { id: string }) => m.id)).toEqual(['tiny']);
            expect(json.model, label).toBe('tiny');
            expect(json.choices, label).toHaveLength(1);
            expect(json.usage.total_tokens, label).toBe(json.usage.prompt_tokens + json.usage.completion_tokens);
          }),
        );
      }
      // The generator reaches both sides of the generation endpoints: answers and refusals.
      if (method === 'POST' && path.startsWith('/v1/c')) expect(statuses).toEqual(expect.arrayContaining([200, 400]));
      expect(serve.child.exitCode).toBeNull();
      const m = await readMetrics(serve.origin);
      expect([m.thinkfl_generations_running, m.thinkfl_generations_waiting]).toEqual([0, 0]);
    },
    300_000,
  );
});
