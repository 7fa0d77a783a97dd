/**
 * vLLM's sleep mode from the client side: POST /sleep?level=1&mode=wait, POST /wake_up and
 * GET /is_sleeping at a server's root (vLLM serves them with --enable-sleep-mode and
 * VLLM_SERVER_DEV_MODE=1). Level 1 moves the weights (and in vLLM 0.33 the loaded LoRA adapters)
 * to host memory and drops the KV cache, so a train update on the same GPU gets that memory;
 * waking brings them back. `wait` lets generations still running finish instead of aborting them.
 * Each call checks GET /is_sleeping afterwards; errors name the replica.
 */
import { HttpError, JsonHttpClient } from '../openai/http';
import { vllmSettingsSchema, type VllmSettings } from './settings';

export class SleepClient {
  private readonly client: JsonHttpClient;

  constructor(
    /** The replica's API root, e.g. http://vllm:8000/v1. */
    readonly url: string,
    apiKey: string | undefined,
    timeoutMs: number,
  ) {
    const root = new URL(url);
    root.pathname = '/';
    this.client = new JsonHttpClient({ baseUrl: root.href, apiKey, timeoutMs, retries: 0, backoffMs: 0, concurrency: 1 });
  }

  async isSleeping(): Promise<boolean> {
    const answer = (await this.client.get('/is_sleeping').catch((e: unknown) => this.fail('GET /is_sleeping', e))) as {
      is_sleeping?: unknown;
    };
    if (typeof answer.is_sleeping !== 'boolean') throw new Error(`${this.url}: GET /is_sleeping answered ${JSON.stringify(answer)}`);
    return answer.is_sleeping;
  }

  async sleep(): Promise<void> {
    await this.client.post('/sleep?level=1&mode=wait', undefined).catch((e: unknown) => this.fail('POST /sleep', e));
    if (!(await this.isSleeping())) throw new Error(`${this.url}: POST /sleep answered, but GET /is_sleeping says it is awake`);
  }

  async wakeUp(): Promise<void> {
    await this.client.post('/wake_up', undefined).catch((e: unknown) => this.fail('POST /wake_up', e));
    if (await this.isSleeping()) throw new Error(`${this.url}: POST /wake_up answered, but GET /is_sleeping says it still sleeps`);
  }

  private fail(call: string, e: unknown): never {
    const hint =
      e instanceof HttpError && e.status === 404
        ? ': the server has no sleep endpoints (vLLM: --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1; trainer-ctl serve: --enable-sleep-mode)'
        : '';
    throw new Error(`${this.url}: ${call} failed${hint}: ${(e as Error).message}`);
  }
}

/** Every replica of a `vllm` backend's settings asleep, or every one awake (all at once; the first failure rejects). */
export class ReplicaSleep {
  readonly replicas: SleepClient[];

  constructor(settings: VllmSettings) {
    const s = vllmSettingsSchema.parse(settings);
    this.replicas = s.replicas.map((url) => new SleepClient(url, process.env[s.api_key_env], s.load_timeout_s * 1000));
  }

  async sleep(): Promise<void> {
    await Promise.all(this.replicas.map((r) => r.sleep()));
  }

  async wakeUp(): Promise<void> {
    await Promise.all(this.replicas.map((r) => r.wakeUp()));
  }
}
