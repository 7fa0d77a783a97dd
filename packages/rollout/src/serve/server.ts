/**
 * An OpenAI-compatible HTTP server over local models, speaking vLLM's endpoints:
 * POST /v1/completions and POST /v1/chat/completions (whole or streamed as server-sent
 * events), GET /v1/models (exactly what is loaded), POST /v1/load_lora_adapter and
 * /v1/unload_lora_adapter, GET /health, GET /metrics (Prometheus text), and with sleep mode
 * POST /sleep, POST /wake_up and GET /is_sleeping (sleep.ts). Every error
 * is answered in OpenAI's shape: 400 naming the field, 404 for a model not served, 413 for a
 * body over the limit, 429 with Retry-After when the generation queue is full, 500 with the
 * reason. A request whose client closes the connection stops its generation.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GenerationInputError } from '../backends/types';
import { Adapters, type AdapterLoader } from './adapters';
import { chatCompletions } from './chat';
import { completions } from './completions';
import type { RequestContext, Route } from './context';
import { ApiError, BadRequest } from './errors';
import { GenerationGate } from './gate';
import { InvalidJson, JsonThread } from './json-thread';
import { ServedModels } from './models';
import type { ServedModel } from './served-model';
import { SleepMode } from './sleep';
import { EventStream } from './stream';

export interface ServerOptions {
  host?: string;
  /** TCP port; 0 picks a free one. Default 0. */
  port?: number;
  /** Largest request body, bytes; a larger one is answered 413. Default 32 MiB. */
  maxBodyBytes?: number;
  /** Generations running at once. Default 4. */
  maxConcurrent?: number;
  /** Generation requests queued behind those; one more is answered 429. Default 64. */
  maxQueue?: number;
  /** Opens the model of POST /v1/load_lora_adapter; without it that endpoint answers 500 as vLLM without --enable-lora does. */
  loadAdapter?: AdapterLoader;
  /** Serve the sleep mode endpoints (vLLM's --enable-sleep-mode); without it they are 404. Default false. */
  sleepMode?: boolean;
}

export interface RunningServer {
  /** Base URL of the API, e.g. http://127.0.0.1:8000/v1. */
  url: string;
  port: number;
  models: ServedModels;
  close(): Promise<void>;
}

const posts: Record<string, Route> = {
  '/v1/completions': completions,
  '/v1/chat/completions': chatCompletions,
};

/** A body still arriving after its 413 is read and dropped for this long, then the connection is cut. */
const DRAIN_MS = 10_000;

interface Served {
  models: ServedModels;
  gate: GenerationGate;
  json: JsonThread;
  adapters: Adapters;
  /** Generations answered per model name, for /metrics. */
  generated: Map<string, number>;
  maxBodyBytes: number;
  sleep?: SleepMode;
}

export async function startServer(models: ServedModel | ServedModels, opts: ServerOptions = {}): Promise<RunningServer> {
  const host = opts.host ?? '127.0.0.1';
  const served0 = models instanceof ServedModels ? models : new ServedModels([models]);
  const gate = new GenerationGate({ maxRunning: opts.maxConcurrent ?? 4, maxWaiting: opts.maxQueue ?? 64 });
  const served: Served = {
    models: served0,
    adapters: new Adapters(served0, opts.loadAdapter),
    generated: new Map(),
    gate,
    json: new JsonThread(),
    maxBodyBytes: opts.maxBodyBytes ?? 32 * 1024 * 1024,
    ...(opts.sleepMode ? { sleep: new SleepMode(gate) } : {}),
  };
  const server = createServer((req, res) => {
    handle(served, req, res).catch((e) => send(res, new ApiError(500, `internal error: ${(e as Error).message}`, 'server_error')));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}/v1`,
    port,
    models: served.models,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((e) => (e ? reject(e) : resolve()));
      }).finally(async () => {
        served.models.removeAdapters();
        await served.json.close();
      }),
  };
}

async function handle(served: Served, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const gone = new AbortController();
  res.on('close', () => {
    if (!res.writableFinished) gone.abort(new Error('the client closed the connection'));
  });
  const [rawPath, rawQuery] = (req.url ?? '/').split('?');
  const path = rawPath.replace(/\/+$/, '');
  if (path === '/v1/models' || path === '/metrics' || path === '/health' || (served.sleep && path === '/is_sleeping')) {
    if (req.method !== 'GET') return send(res, new ApiError(405, `${req.method} ${path}: use GET`));
    if (path === '/metrics') return sendText(res, metrics(served));
    // vLLM answers a live server with an empty 200, asleep or not.
    if (path === '/health') return sendText(res, '');
    if (path === '/is_sleeping') return sendJson(res, 200, { is_sleeping: served.sleep!.sleeping });
    return sendJson(res, 200, { object: 'list', data: served.models.list().map(modelCard) });
  }
  if (served.sleep && (path === '/sleep' || path === '/wake_up')) {
    if (req.method !== 'POST') return send(res, new ApiError(405, `${req.method} ${path}: use POST`));
    const query = new URLSearchParams(rawQuery ?? '');
    try {
      return sendJson(res, 200, path === '/sleep' ? await served.sleep.sleep(query) : served.sleep.wakeUp(query));
    } catch (e) {
      if (e instanceof ApiError) return send(res, e);
      throw e;
    }
  }
  const adapter = path === '/v1/load_lora_adapter' || path === '/v1/unload_lora_adapter';
  const route = posts[path];
  if (!route && !adapter) return send(res, new ApiError(404, `no route ${req.method} ${path}`, 'not_found_error'));
  if (req.method !== 'POST') return send(res, new ApiError(405, `${req.method} ${path}: use POST`));
  const held: (() => void)[] = [];
  const ctx: RequestContext = {
    model: (name) => {
      const h = served.models.hold(name);
      held.push(h.release);
      return h.model;
    },
    signal: gone.signal,
    generate: (model, request) =>
      served.gate.run(gone.signal, async () => {
        // Taken once admitted: a sleep in abort mode stops the generations running at that moment.
        const signal = served.sleep ? AbortSignal.any([gone.signal, served.sleep.signal]) : gone.signal;
        const [gen] = await model.backend.generate([{ ...request, signal }]);
        served.generated.set(model.id, (served.generated.get(model.id) ?? 0) + 1);
        return gen;
      }),
  };
  try {
    const bytes = await readBody(req, served.maxBodyBytes);
    let body: unknown;
    try {
      body = await served.json.parse(bytes);
    } catch (e) {
      if (e instanceof InvalidJson) throw new BadRequest(`request body is not valid JSON: ${e.message}`);
      throw e;
    }
    if (adapter) {
      return sendText(res, path === '/v1/load_lora_adapter' ? await served.adapters.load(body) : served.adapters.unload(body));
    }
    const answer = await route(ctx, body);
    if (answer instanceof EventStream) await streamEvents(res, answer);
    else if (!gone.signal.aborted) sendJson(res, 200, answer);
  } catch (e) {
    // Nobody is left to answer.
    if (gone.signal.aborted) return;
    const error = e instanceof ApiError ? e : e instanceof GenerationInputError ? new BadRequest(e.message) : undefined;
    if (!error) throw e;
    // A stream already under way reports the error as its last event, as OpenAI's does.
    if (res.headersSent) return void res.end(`data: ${JSON.stringify(error.body)}\n\n`);
    return send(res, error);
  } finally {
    for (const release of held) release();
  }
}

/** Writes a stream's chunks as server-sent events; the headers go with the first chunk, so an error before it is answered whole. */
async function streamEvents(res: ServerResponse, stream: EventStream): Promise<void> {
  await stream.run((chunk) => {
    if (res.destroyed) return;
    if (!res.headersSent)
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  });
  if (!res.destroyed) res.end('data: [DONE]\n\n');
}

/** One /v1/models entry as vLLM lists it: adapters name their path (root) and base model (parent). */
function modelCard(m: { model: ServedModel; path?: string; parent?: string }): Record<string, unknown> {
  return {
    id: m.model.id,
    object: 'model',
    created: 0,
    owned_by: 'thinkfl',
    root: m.path ?? m.model.id,
    parent: m.parent ?? null,
    max_model_len: m.model.contextLength,
  };
}

function readBody(req: IncomingMessage, max: number): Promise<Buffer> {
  const tooLarge = () => new ApiError(413, `the request body is larger than ${max} bytes`, 'invalid_request_error', 'request_too_large');
  const declared = Number(req.headers['content-length']);
  if (declared > max) return Promise.reject(drain(req, tooLarge()));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (c: Buffer) => {
      size += c.length;
      if (size <= max) return void chunks.push(c);
      req.off('data', onData);
      reject(drain(req, tooLarge()));
    };
    req.on('data', onData);
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** Reads and drops the rest of a refused body, so the client gets to read its 413 instead of a reset connection. */
function drain(req: IncomingMessage, error: ApiError): ApiError {
  const cut = setTimeout(() => req.socket.destroy(), DRAIN_MS);
  req.on('end', () => clearTimeout(cut));
  req.on('close', () => clearTimeout(cut));
  req.resume();
  return error;
}

function metrics({ gate, generated, sleep }: Served): string {
  const lines: string[] = [];
  const metric = (name: string, type: 'gauge' | 'counter', help: string, value: number) =>
    lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`, `${name} ${value}`);
  metric('thinkfl_generations_running', 'gauge', 'Generations running now.', gate.running);
  metric('thinkfl_generations_waiting', 'gauge', 'Generation requests queued for a free slot.', gate.waiting);
  metric(
    'thinkfl_generations_completed_total',
    'counter',
    'Generations finished with their client still there (answered or failed).',
    gate.completed,
  );
  metric(
    'thinkfl_generations_cancelled_total',
    'counter',
    'Generations stopped because their client closed the connection.',
    gate.cancelled,
  );
  if (sleep) {
    metric('thinkfl_sleeping', 'gauge', 'Whether the server is asleep (POST /sleep, until POST /wake_up).', sleep.sleeping ? 1 : 0);
    metric('thinkfl_sleeps_total', 'counter', 'POST /sleep calls answered.', sleep.sleeps);
    metric('thinkfl_wake_ups_total', 'counter', 'POST /wake_up calls answered.', sleep.wakeUps);
  }
  lines.push(
    '# HELP thinkfl_model_generations_total Generations finished per served model (base model or loaded adapter).',
    '# TYPE thinkfl_model_generations_total counter',
  );
  for (const [id, n] of generated) lines.push(`thinkfl_model_generations_total{model=${JSON.stringify(id)}} ${n}`);
  return `${lines.join('\n')}\n`;
}

function send(res: ServerResponse, e: ApiError): void {
  sendJson(res, e.status, e.body, e.headers);
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.headersSent) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

function sendText(res: ServerResponse, text: string): void {
  if (res.headersSent) return;
  res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
