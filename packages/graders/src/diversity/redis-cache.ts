/**
 * Diversity cache on Redis, shared by graders in any number of processes. One hash per
 * question, path -> first owner: HSETNX then HGET in one MULTI decides novelty atomically, so
 * two concurrent graders can never both see one path as new, and the first owner asking again
 * gets the same answer.
 */
import { Redis } from 'ioredis';
import { z } from 'zod';
import type { DiversityCache } from './cache';

export const redisDiversitySettings = z
  .object({
    /** Prefix of the per-question hash keys (the question id follows it). Default 'thinkfl:diversity:'. */
    keyPrefix: z.string().default('thinkfl:diversity:'),
    /** Seconds a question's set lives after its last new path; 0 keeps it for ever. Default 0. */
    ttlSeconds: z.number().int().nonnegative().default(0),
  })
  .strict();
export type RedisDiversitySettings = z.output<typeof redisDiversitySettings>;

export class RedisDiversityCache implements DiversityCache {
  private readonly redis: Redis;
  /** Only a connection this cache opened itself is closed by close(). */
  private readonly owned: boolean;

  constructor(
    redis: Redis | string,
    private readonly settings: RedisDiversitySettings = redisDiversitySettings.parse({}),
  ) {
    this.owned = typeof redis === 'string';
    this.redis = typeof redis === 'string' ? new Redis(redis, { maxRetriesPerRequest: 3 }) : redis;
  }

  async markSeen(questionId: string, pathKey: string, owner: string): Promise<boolean> {
    const key = this.settings.keyPrefix + questionId;
    const replies = await this.redis.multi().hsetnx(key, pathKey, owner).hget(key, pathKey).exec();
    if (!replies) throw new Error(`diversity cache: transaction on ${key} was aborted`);
    for (const [err] of replies) if (err) throw err;
    const [[, added], [, first]] = replies as [[null, number], [null, string]];
    if (added === 1 && this.settings.ttlSeconds > 0) await this.redis.expire(key, this.settings.ttlSeconds);
    return first === owner;
  }

  async close(): Promise<void> {
    if (this.owned) await this.redis.quit();
  }
}
