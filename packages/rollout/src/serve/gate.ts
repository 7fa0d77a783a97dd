/**
 * Admission of generations: at most `maxRunning` at once, up to `maxWaiting` more queued in
 * arrival order, and a 429 with Retry-After beyond that. A queued request whose client left
 * leaves the queue. While paused (a sleeping server) nothing new starts: requests queue until
 * `resume`. Counts are exposed for /metrics.
 */
import { ApiError } from './errors';

export interface GateLimits {
  /** Generations running at once. */
  maxRunning: number;
  /** Requests queued behind them; one more is refused with 429. */
  maxWaiting: number;
}

interface Waiter {
  start: () => void;
}

export class GenerationGate {
  running = 0;
  /** Generations finished with their client still there (answered or failed), and those whose client left. */
  completed = 0;
  cancelled = 0;
  private readonly queue: Waiter[] = [];
  private paused = false;
  /** Called once nothing runs (see `idle`). */
  private drained: (() => void)[] = [];
  /** Moving average of a generation's wall time, seconds: what Retry-After is estimated from. */
  private meanSeconds = 1;

  constructor(readonly limits: GateLimits) {}

  get waiting(): number {
    return this.queue.length;
  }

  /** Runs `fn` once a slot is free; rejects with the 429 when the queue is full, with the signal's reason once aborted while queued. */
  async run<T>(signal: AbortSignal, fn: () => Promise<T>): Promise<T> {
    if (this.paused || this.running >= this.limits.maxRunning) await this.enqueue(signal);
    else this.running++;
    const t0 = performance.now();
    try {
      return await fn();
    } finally {
      this.meanSeconds = 0.8 * this.meanSeconds + 0.2 * ((performance.now() - t0) / 1000);
      if (signal.aborted) this.cancelled++;
      else this.completed++;
      this.release();
    }
  }

  private enqueue(signal: AbortSignal): Promise<void> {
    if (this.queue.length >= this.limits.maxWaiting) {
      // Time until the queue ahead has drained through the running slots.
      const seconds = Math.max(1, Math.ceil(((this.queue.length + 1) / this.limits.maxRunning) * this.meanSeconds));
      throw new ApiError(
        429,
        `the server is busy: ${this.running} generations running and ${this.queue.length} queued; retry after ${seconds} s`,
        'rate_limit_error',
        'server_busy',
        null,
        { 'retry-after': String(seconds) },
      );
    }
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const w: Waiter = {
        start: () => {
          signal.removeEventListener('abort', leave);
          resolve();
        },
      };
      const leave = () => {
        const i = this.queue.indexOf(w);
        if (i >= 0) this.queue.splice(i, 1);
        reject(signal.reason);
      };
      signal.addEventListener('abort', leave, { once: true });
      this.queue.push(w);
    });
  }

  /** New generations wait in the queue from now on. */
  pause(): void {
    this.paused = true;
  }

  /** Starts queued generations again, as many as there are free slots. */
  resume(): void {
    this.paused = false;
    while (this.running < this.limits.maxRunning && this.queue.length) {
      this.running++;
      this.queue.shift()!.start();
    }
  }

  /** Resolves once no generation runs. */
  idle(): Promise<void> {
    if (this.running === 0) return Promise.resolve();
    return new Promise((resolve) => this.drained.push(resolve));
  }

  /** Hands the slot to the first queued request (unless paused), or frees it. */
  private release(): void {
    const next = this.paused ? undefined : this.queue.shift();
    if (next) {
      next.start();
      return;
    }
    this.running--;
    if (this.running === 0) for (const done of this.drained.splice(0)) done();
  }
}
