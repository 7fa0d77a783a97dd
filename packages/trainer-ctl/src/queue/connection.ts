/**
 * Redis connections of the queues. BullMQ needs maxRetriesPerRequest null on blocking
 * connections. An unreachable Redis is retried with a capped exponential backoff, one log line
 * per attempt; a refused password (WRONGPASS, NOAUTH) cannot heal by retrying, so the
 * connection stops and whoever waits for it gets a RedisAuthError.
 */
import { Redis } from 'ioredis';
import { redactUrl } from './redis-url';

/** The server refused the credentials: fatal, never retried. */
export class RedisAuthError extends Error {}

export interface ConnectOptions {
  /** One line per failed connection attempt. Default: silent. */
  log?: (line: string) => void;
}

/** Delay before reconnect attempt `attempt` (1-based), ms: 100, 200, 400 ... capped at 5 s. */
export const reconnectDelayMs = (attempt: number): number => Math.min(100 * 2 ** (attempt - 1), 5000);

const AUTH_FAILED = 'thinkfl:auth-failed';
const authFailures = new WeakMap<Redis, RedisAuthError>();

const isAuthError = (e: Error): boolean => /^(WRONGPASS|NOAUTH)\b/.test(e.message);

const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
]);

/**
 * An error of the connection itself (Redis unreachable or gone), which BullMQ forwards from
 * its own connections; the queue connection already logs one line per attempt for it.
 */
export const isConnectionError = (e: Error): boolean =>
  CONNECTION_CODES.has((e as NodeJS.ErrnoException).code ?? '') || e.message === 'Connection is closed.' || isAuthError(e);

/** A connection to `url`; fails clearly on a URL that is not redis:// or rediss://. */
export function connectRedis(url: string, opts: ConnectOptions = {}): Redis {
  const where = redactUrl(url);
  if (!/^rediss?:\/\//.test(url)) throw new Error(`expected a redis:// or rediss:// URL, got ${JSON.stringify(where)}`);
  let lastError = 'connection lost';
  let attempt = 1;
  // BullMQ's duplicates of this connection inherit the strategy, but only this one logs.
  const redis = new Redis(url, { maxRetriesPerRequest: null, enableReadyCheck: true, retryStrategy: reconnectDelayMs });
  redis.on('reconnecting', (ms: number) => opts.log?.(`Redis ${where} unreachable (${lastError}); attempt ${++attempt} in ${ms} ms`));
  redis.on('ready', () => (attempt = 1));
  // Always listened to: an unlistened 'error' is ioredis' "Unhandled error event" with a stack.
  redis.on('error', (e: Error) => {
    if (!isAuthError(e)) {
      lastError = e.message;
      return;
    }
    if (authFailures.has(redis)) return;
    const err = new RedisAuthError(
      `Redis ${where}: authentication failed (${e.message.split(/[.\n]/)[0]}); check the password (REDIS_PASSWORD) and user`,
    );
    authFailures.set(redis, err);
    redis.disconnect();
    redis.emit(AUTH_FAILED, err);
  });
  listenDuplicates(redis);
  return redis;
}

/**
 * Every duplicate of `client` (ours for subscriptions, BullMQ's for blocking reads and queue
 * events), and theirs in turn, gets an 'error' listener when it is made. A duplicate without one
 * prints ioredis' "Unhandled error event" with a stack on each reconnect attempt while Redis is
 * down (seen when the run's Redis was SIGKILLed); the parent connection already reports the outage
 * in one line per attempt.
 */
function listenDuplicates(client: Redis): void {
  const duplicate = client.duplicate.bind(client);
  client.duplicate = (...args: Parameters<Redis['duplicate']>) => {
    const copy = duplicate(...args);
    copy.on('error', () => undefined);
    listenDuplicates(copy);
    return copy;
  };
}

/** Resolves once `redis` is ready; rejects with RedisAuthError on refused credentials, or with the signal's reason on abort. */
export function waitReady(redis: Redis, signal?: AbortSignal): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  const failed = authFailures.get(redis);
  if (failed) return Promise.reject(failed);
  if (signal?.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const done = () => {
      redis.off('ready', onReady);
      redis.off(AUTH_FAILED, onAuth);
      signal?.removeEventListener('abort', onAbort);
    };
    const onReady = () => (done(), resolve());
    const onAuth = (e: RedisAuthError) => (done(), reject(e));
    const onAbort = () => (done(), reject(signal!.reason));
    redis.once('ready', onReady);
    redis.once(AUTH_FAILED, onAuth);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Calls `onFailure` if the server refuses the credentials later (a password rotated while running). */
export function onAuthFailure(redis: Redis, onFailure: (e: RedisAuthError) => void): void {
  redis.once(AUTH_FAILED, onFailure);
}
