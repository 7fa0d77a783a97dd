/** Worker heartbeats in keys.workers (hash workerId -> JSON), read by `trainer-ctl status`. */
import { hostname } from 'node:os';
import type { Redis } from 'ioredis';
import { keys } from './jobs';

export interface WorkerBeat {
  id: string;
  kind: string;
  pid?: number;
  host?: string;
  /** Unix ms of the last heartbeat. */
  last_seen: number;
}

export interface Heartbeat {
  /** Stops beating and removes the worker from the registry. */
  stop(): Promise<void>;
}

/** Beats now and every everyMs until stopped. */
export async function startHeartbeat(redis: Redis, runId: string, id: string, kind: string, everyMs: number): Promise<Heartbeat> {
  const beat = () =>
    redis.hset(keys.workers(runId), id, JSON.stringify({ kind, pid: process.pid, host: hostname(), last_seen: Date.now() }));
  await beat();
  const timer = setInterval(() => void beat().catch(() => undefined), everyMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await redis.hdel(keys.workers(runId), id);
    },
  };
}

/** Every registered worker, newest heartbeat first. */
export async function listWorkers(redis: Redis, runId: string): Promise<WorkerBeat[]> {
  const all = await redis.hgetall(keys.workers(runId));
  return Object.entries(all)
    .map(([id, json]) => ({ id, ...(JSON.parse(json) as Omit<WorkerBeat, 'id'>) }))
    .sort((a, b) => b.last_seen - a.last_seen);
}
