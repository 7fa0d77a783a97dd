/** Redis connections of the queues: BullMQ needs maxRetriesPerRequest null on blocking connections. */
import { Redis } from 'ioredis';

/** A connection to `url`; fails clearly on a URL that is not redis:// or rediss://. */
export function connectRedis(url: string): Redis {
  if (!/^rediss?:\/\//.test(url)) throw new Error(`expected a redis:// or rediss:// URL, got ${JSON.stringify(url)}`);
  return new Redis(url, { maxRetriesPerRequest: null, enableReadyCheck: true });
}
