/**
 * One inference server of the `vllm` backend: its HTTP client (bounded concurrency), the
 * policy versions it holds, and whether it is in rotation. Every error names the replica.
 */
import { HttpError, JsonHttpClient } from '../openai/http';
import { modelsResponseSchema } from '../openai/responses';

export class Replica {
  readonly client: JsonHttpClient;
  /** Versions loaded on it (loaded, and listed by GET /v1/models from their own directory). */
  readonly loaded = new Set<number>();
  /** In rotation: takes requests. A replica leaves when it fails and comes back once it answers /health and holds the current version. */
  ready = false;
  /** Why it is out of rotation, for errors. */
  reason = 'not synced yet';
  inflight = 0;

  constructor(
    readonly url: string,
    apiKey: string | undefined,
    s: { request_timeout_s: number; concurrency_per_replica: number; backoff_ms: number },
  ) {
    this.client = new JsonHttpClient({
      baseUrl: url,
      apiKey,
      timeoutMs: s.request_timeout_s * 1000,
      retries: 0,
      backoffMs: s.backoff_ms,
      concurrency: s.concurrency_per_replica,
    });
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

  /**
   * Loads `name` from `path` and checks that GET /v1/models lists it with `path` as its root;
   * one attempt, bounded by timeoutMs. vLLM refuses a name it holds already and keeps serving
   * what it loaded first: names carry the content's digest, so a name held already has these
   * very weights (an earlier attempt whose answer was lost, or a resumed run that wrote the same
   * version again), and a held name served from another path is pointed at `path` with
   * load_inplace.
   */
  async load(name: string, path: string, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    const left = () => Math.max(1, deadline - Date.now());
    try {
      await this.client.post('/load_lora_adapter', { lora_name: name, lora_path: path }, { timeoutMs, text: true });
    } catch (e) {
      if (!(e instanceof HttpError && e.status === 400 && /already been loaded/.test(e.message))) throw e;
      if ((await this.root(name, left())) !== path) {
        await this.client.post(
          '/load_lora_adapter',
          { lora_name: name, lora_path: path, load_inplace: true },
          { timeoutMs: left(), text: true },
        );
      }
    }
    const root = await this.root(name, left());
    if (root !== path) throw new Error(`GET ${this.url}/models lists ${name} from ${root ?? 'no path'} after loading it from ${path}`);
  }

  /** The root GET /v1/models gives `name` (its lora_path); throws naming what it lists when it lists no such model. */
  private async root(name: string, timeoutMs: number): Promise<string | null | undefined> {
    const models = modelsResponseSchema.parse(await this.client.get('/models', { timeoutMs }));
    const card = models.data.find((m) => m.id === name);
    if (!card)
      throw new Error(`GET ${this.url}/models does not list ${name} after loading it (lists ${models.data.map((m) => m.id).join(', ')})`);
    return card.root;
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
