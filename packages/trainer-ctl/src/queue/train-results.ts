/**
 * Results of finished updates, kept in Redis by the train worker: a job retried after its
 * update ran (its result was lost with a dead worker) is answered from here, not trained twice.
 */
import type { Redis } from 'ioredis';
import type { TrainResult } from './jobs';

export const trainResultsKey = (runId: string) => `thinkfl:${runId}:train-results`;

export class TrainResultStore {
  constructor(
    private readonly redis: Redis,
    readonly runId: string,
  ) {}

  async put(r: TrainResult): Promise<void> {
    await this.redis.hset(trainResultsKey(this.runId), String(r.update), JSON.stringify(r));
  }

  /** Updates that have a stored result. */
  async updates(): Promise<number[]> {
    return (await this.redis.hkeys(trainResultsKey(this.runId))).map(Number);
  }

  async forget(update: number): Promise<void> {
    await this.redis.hdel(trainResultsKey(this.runId), String(update));
  }

  async get(update: number): Promise<TrainResult | undefined> {
    const json = await this.redis.hget(trainResultsKey(this.runId), String(update));
    return json === null ? undefined : (JSON.parse(json) as TrainResult);
  }
}
