/**
 * One inference server of the `vllm` backend: its HTTP client (bounded concurrency), the
 * policy versions it holds, and whether it is in rotation. Every error names the replica.
 */
import { JsonHttpClient } from '../openai/http';
import { modelsResponseSchema } from '../openai/responses';

export class Replica {
  readonly client: JsonHttpClient;
  /** Versions loaded on it (loaded and seen in GET /v1/models). */
  readonly loaded = new Set<number>();
  /** In rotation: takes requests. A replica leaves when it fails and comes back once it answers /health and holds the current version. */
  ready = false;
  /** Why it is out of rotation, for errors. */
  reason = 'not synced yet';
  inflight = 0;

  constructor(
    readonly url: string,
    apiKey: string | undefined,
    private readonly s: { request_timeout_s: number; concurrency_per_replica: number; backoff_ms: number },
  ) {
    this.client = new JsonHttpClient({ baseUrl: url, apiKey, timeoutMs: s.request_timeout_s * 1000, retries: 0, backoffMs: s.backoff_ms, concurrency: s.concurrency_per_replica });
  }

  /** GET /health at the server's root (beside /v1), as vLLM serves it. */
  async healthy(timeoutMs: number): Promise<boolean> {
    const root = new URL(this.url);
    root.pathname = '/health';
    try {
      const r = await fetch(root, { signal: AbortSignal.timeout(timeoutMs) });
      await r.arrayBuffer();
      return r.ok;
    } catch {
      return false;
    }
  }

  /** Loads `name` from `path` and checks GET /v1/models lists it; one attempt, bounded by timeoutMs. */
  async load(name: string, path: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    try {
      await this.client.post('/load_lora_adapter', { lora_name: name, lora_path: path }, { timeoutMs, text: true });
    } catch (e) {
      // Loaded by an earlier attempt whose answer was lost: the list below decides.
      if (!/already been loaded/.test((e as Error).message)) throw e;
    }
    const models = modelsResponseSchema.parse(await this.client.get('/models', { timeoutMs: Math.max(1, deadline - Date.now()) }));
    if (!models.data.some((m) => m.id === name)) throw new Error(`GET ${this.url}/models does not list ${name} after loading it (lists ${models.data.map((m) => m.id).join(', ')})`);
  }

  async unload(name: string, timeoutMs: number): Promise<void> {
    await this.client.post('/unload_lora_adapter', { lora_name: name }, { timeoutMs, text: true });
  }

  out(reason: string): void {
    this.ready = false;
    this.reason = reason;
    this.loaded.clear();
  }
}
