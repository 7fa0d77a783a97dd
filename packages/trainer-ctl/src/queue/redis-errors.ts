/**
 * Connection errors of Redis clients and BullMQ queues, reported once per outage. A client
 * retries every few hundred ms while Redis is down (its commands wait for the reconnect),
 * and each retry is an 'error' event: without a listener ioredis and BullMQ print every one
 * as unhandled, with one they would still flood the log. Errors other than a lost
 * connection are reported every time.
 */
import type { Redis } from 'ioredis';

/** A BullMQ Queue or Worker (they pass their connections' errors on). */
interface ErrorSource {
  on(event: 'error', listener: (err: Error) => void): unknown;
}

const AUTH_ERROR = /^(WRONGPASS|NOAUTH)\b/;
const CONNECTION_ERROR = /ECONNREFUSED|ECONNRESET|EPIPE|ETIMEDOUT|EHOSTUNREACH|Connection is closed|Socket closed unexpectedly/;

export class RedisErrorReporter {
  private down = false;

  constructor(private readonly log: (line: string) => void) {}

  /** Listens to a client's 'error' events, and to 'ready' (its reconnect ends an outage). */
  watchClient(client: Redis): Redis {
    client.on('ready', () => this.back());
    return this.watch(client);
  }

  /** Listens to `source`'s 'error' events. */
  watch<T extends ErrorSource>(source: T): T {
    source.on('error', (err) => this.report(err));
    return source;
  }

  private report(err: Error): void {
    // A refused password is fatal: connectRedis stops the client and its waiters say so once.
    if (AUTH_ERROR.test(err.message)) return;
    if (!CONNECTION_ERROR.test(err.message)) {
      this.log(`redis error: ${err.message}`);
      return;
    }
    if (this.down) return;
    this.down = true;
    this.log(`redis connection lost (${err.message}); waiting for it to come back`);
  }

  private back(): void {
    if (!this.down) return;
    this.down = false;
    this.log('redis connection is back');
  }
}
