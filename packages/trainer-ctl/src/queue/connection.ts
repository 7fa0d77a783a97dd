/** Redis connections of the queues: BullMQ needs maxRetriesPerRequest null on blocking connections. */
import { Redis } from 'ioredis';

/** A connection to `url`; fails clearly on a URL that is not redis:// or rediss://. */
export function connectRedis(url: string): Redis {
  if (!/^rediss?:\/\//.test(url)) throw new Error(`expected a redis:// or rediss:// URL, got ${JSON.stringify(url)}`);
  return new Redis(url, { maxRetriesPerRequest: null, enableReadyCheck: true });
}

/** Awaits `p`, rejecting with `message` when it does not settle within `ms`. */
export async function withTimeout<T>(p: Promise<T>, ms: number, message: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(message())), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
