/**
 * An OpenAI-compatible HTTP server over a local model: POST /v1/completions,
 * POST /v1/chat/completions, GET /v1/models. Bad requests get a 400 with OpenAI's error body
 * naming the field; generation failures a 500 with the reason.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chatCompletions } from './chat';
import { completions } from './completions';
import { GenerationInputError } from '../backends/types';
import { BadRequest } from './protocol';
import type { ServedModel } from './served-model';

/** Largest request body accepted, bytes. */
const MAX_BODY = 32 * 1024 * 1024;

export interface RunningServer {
  /** Base URL of the API, e.g. http://127.0.0.1:8000/v1. */
  url: string;
  port: number;
  close(): Promise<void>;
}

type Route = (model: ServedModel, body: unknown) => Promise<Record<string, unknown>>;

const posts: Record<string, Route> = {
  '/v1/completions': completions,
  '/v1/chat/completions': chatCompletions,
};

export async function startServer(model: ServedModel, opts: { host?: string; port?: number } = {}): Promise<RunningServer> {
  const host = opts.host ?? '127.0.0.1';
  const server = createServer((req, res) => {
    handle(model, req, res).catch((e) => send(res, 500, errorBody(`internal error: ${(e as Error).message}`, 'server_error')));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}/v1`,
    port,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((e) => (e ? reject(e) : resolve()));
      }),
  };
}

async function handle(model: ServedModel, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const path = (req.url ?? '/').split('?')[0].replace(/\/+$/, '');
  if (path === '/v1/models') {
    if (req.method !== 'GET') return send(res, 405, errorBody(`${req.method} ${path}: use GET`));
    return send(res, 200, { object: 'list', data: [{ id: model.id, object: 'model', created: 0, owned_by: 'thinkfl' }] });
  }
  const route = posts[path];
  if (!route) return send(res, 404, errorBody(`no route ${req.method} ${path}`, 'not_found_error'));
  if (req.method !== 'POST') return send(res, 405, errorBody(`${req.method} ${path}: use POST`));
  let body: unknown;
  try {
    body = JSON.parse(await readBody(req));
  } catch (e) {
    return send(res, 400, errorBody(`request body is not valid JSON: ${(e as Error).message}`));
  }
  try {
    send(res, 200, await route(model, body));
  } catch (e) {
    if (e instanceof BadRequest) return send(res, 400, errorBody(e.message, 'invalid_request_error', e.param));
    if (e instanceof GenerationInputError) return send(res, 400, errorBody(e.message));
    throw e;
  }
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) {
        reject(new Error(`larger than ${MAX_BODY} bytes`));
        req.destroy();
      } else chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

function errorBody(message: string, type = 'invalid_request_error', param?: string): Record<string, unknown> {
  return { error: { message, type, param: param ?? null, code: null } };
}

function send(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}
