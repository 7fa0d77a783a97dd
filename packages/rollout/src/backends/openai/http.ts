/**
 * JSON POST/GET with what a remote inference server needs from its client: a per-request
 * timeout, retries with exponential backoff on network errors, 429 and 5xx (never on other
 * 4xx: those are our mistakes and would fail again), and a cap on requests in flight.
 */
export interface HttpSettings {
  baseUrl: string;
  apiKey?: string;
  timeoutMs: number;
  retries: number;
  backoffMs: number;
  concurrency: number;
}

export class HttpError extends Error {
  constructor(
    message: string,
    readonly status: number | undefined,
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

/** A counting semaphore: at most `limit` holders at once, the others wait in order. */
export class Semaphore {
  private active = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly limit: number) {}

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.active++;
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active--;
    }
  }
}

/** One call's own limits, where they differ from the client's. */
export interface CallOptions {
  timeoutMs?: number;
  retries?: number;
  /** The answer is plain text (vLLM's LoRA endpoints), not JSON. */
  text?: boolean;
}

export class JsonHttpClient {
  private readonly gate: Semaphore;

  constructor(private readonly s: HttpSettings) {
    this.gate = new Semaphore(s.concurrency);
  }

  post(path: string, body: unknown, opts: CallOptions = {}): Promise<unknown> {
    return this.request('POST', path, body, opts);
  }

  get(path: string, opts: CallOptions = {}): Promise<unknown> {
    return this.request('GET', path, undefined, opts);
  }

  private async request(method: string, path: string, body: unknown, opts: CallOptions): Promise<unknown> {
    const url = `${this.s.baseUrl.replace(/\/+$/, '')}${path}`;
    const retries = opts.retries ?? this.s.retries;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.gate.run(() => this.once(method, url, body, opts.timeoutMs ?? this.s.timeoutMs, opts.text === true));
      } catch (e) {
        const err = e instanceof HttpError ? e : new HttpError(String(e), undefined, false);
        if (!err.retryable || attempt >= retries) {
          err.message = `${method} ${url} failed after ${attempt + 1} attempt(s): ${err.message}`;
          throw err;
        }
        await new Promise((r) => setTimeout(r, this.s.backoffMs * 2 ** attempt));
      }
    }
  }

  private async once(method: string, url: string, body: unknown, timeoutMs: number, text: boolean): Promise<unknown> {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), timeoutMs);
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers: {
          'content-type': 'application/json',
          ...(this.s.apiKey ? { authorization: `Bearer ${this.s.apiKey}` } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: abort.signal,
      });
      const answer = await res.text();
      if (!res.ok) {
        const retryable = res.status === 429 || res.status >= 500;
        throw new HttpError(`HTTP ${res.status}: ${answer.slice(0, 500)}`, res.status, retryable);
      }
      if (text) return answer;
      try {
        return JSON.parse(answer);
      } catch {
        throw new HttpError(`response is not JSON: ${answer.slice(0, 200)}`, res.status, false);
      }
    } catch (e) {
      if (e instanceof HttpError) throw e;
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      const detail = cause ? ` (${cause.code ?? cause.message})` : '';
      const reason = abort.signal.aborted ? `timed out after ${timeoutMs} ms` : `${(e as Error).message}${detail}`;
      throw new HttpError(reason, undefined, true);
    } finally {
      clearTimeout(timer);
    }
  }
}
