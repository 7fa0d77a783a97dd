/**
 * Trajectories of a group in the Redis hash keys.group(run, group): field = sample index. A
 * retried sample overwrites its own field, so a group holds at most one trajectory per index
 * and is complete when it holds G fields. Each write is announced on a per-run channel so a
 * waiter wakes at once instead of polling.
 *
 * With a data directory, a trajectory longer than a few hundred tokens goes to a token-batch
 * file (step-file.ts) under <dataDir>/groups/<group>/, written whole before the field that
 * names it, and the field holds the file's reference: Redis carries coordination, not tokens.
 */
import { randomUUID } from 'node:crypto';
import { rmSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type { Redis } from 'ioredis';
import { keys, type Trajectory } from './jobs';
import { readTokenBatch, writeTokenBatch, type TokenBatchRef } from './step-file';

/** Where long trajectories go. */
export interface TrajectoryFiles {
  /** The run's shared data directory (every worker and the controller see the same path). */
  dataDir: string;
  /** Trajectories of more tokens than this go to a file. Default 256 (about 2 KB of JSON). */
  inlineMaxTokens?: number;
}

/** A hash field that names a trajectory's file instead of holding it. */
interface StoredRef {
  file: TokenBatchRef;
}

const groupDirName = (groupId: string) => encodeURIComponent(groupId);

/** Channel announcing "group <id> got a sample" for one run. */
export const groupChannel = (runId: string) => `thinkfl:${runId}:group-updates`;

export class GroupTimeoutError extends Error {
  override name = 'GroupTimeoutError';
}

export class GroupStore {
  private subscriber?: Promise<Redis>;
  private readonly waiters = new Map<string, Set<() => void>>();

  constructor(
    private readonly redis: Redis,
    readonly runId: string,
    /** Re-check interval while waiting, in case an announcement was lost (reconnect), ms. */
    private readonly recheckMs = 1000,
    /** Where long trajectories go; absent: every trajectory is stored inline. */
    private readonly files?: TrajectoryFiles,
  ) {}

  /** Stores a sample; a second put for the same (group, index) replaces the first. */
  async put(t: Trajectory): Promise<void> {
    if (!Number.isInteger(t.sample_index) || t.sample_index < 0) throw new Error(`group ${t.group_id}: bad sample index ${t.sample_index}`);
    await this.redis
      .multi()
      .hset(keys.group(this.runId, t.group_id), String(t.sample_index), this.encode(t))
      .publish(groupChannel(this.runId), t.group_id)
      .exec();
  }

  /** Samples stored so far. */
  async count(groupId: string): Promise<number> {
    return this.redis.hlen(keys.group(this.runId, groupId));
  }

  /** Sample indices stored so far, ascending. */
  async indices(groupId: string): Promise<number[]> {
    return (await this.redis.hkeys(keys.group(this.runId, groupId))).map(Number).sort((a, b) => a - b);
  }

  /** Sample indices stored so far of each group, in one round trip. */
  async indicesOf(groupIds: readonly string[]): Promise<Map<string, number[]>> {
    const pipe = this.redis.pipeline();
    for (const g of groupIds) pipe.hkeys(keys.group(this.runId, g));
    const replies = (await pipe.exec()) ?? [];
    return new Map(
      groupIds.map((g, i) => {
        const [err, fields] = replies[i];
        if (err) throw err;
        return [g, (fields as string[]).map(Number).sort((a, b) => a - b)];
      }),
    );
  }

  /** The stored samples in sample order. */
  async read(groupId: string): Promise<Trajectory[]> {
    const all = await this.redis.hgetall(keys.group(this.runId, groupId));
    return Object.entries(all)
      .map(([field, json]) => ({ index: Number(field), t: decode(json) }))
      .sort((a, b) => a.index - b.index)
      .map((e) => e.t);
  }

  /**
   * Resolves with the G samples (indices 0..G-1, in order) once all are stored; rejects after
   * timeoutMs naming the indices still missing.
   */
  async waitComplete(groupId: string, size: number, timeoutMs: number): Promise<Trajectory[]> {
    await this.subscribe();
    return new Promise<Trajectory[]>((resolve, reject) => {
      let checking = false;
      let again = false;
      const finish = (err: Error | null, value?: Trajectory[]) => {
        clearTimeout(timer);
        clearInterval(recheck);
        const set = this.waiters.get(groupId);
        set?.delete(check);
        if (set?.size === 0) this.waiters.delete(groupId);
        if (err) reject(err);
        else resolve(value as Trajectory[]);
      };
      const check = () => {
        // Announcements may arrive while a check is in flight; one more check covers them all.
        if (checking) {
          again = true;
          return;
        }
        checking = true;
        this.completeOrNull(groupId, size)
          .then((ready) => {
            checking = false;
            if (ready) finish(null, ready);
            else if (again) {
              again = false;
              check();
            }
          })
          .catch((e: Error) => finish(e));
      };
      const timer = setTimeout(() => {
        void this.indices(groupId).then(
          (have) => {
            const missing = [...Array(size).keys()].filter((i) => !have.includes(i));
            finish(
              new GroupTimeoutError(
                `group ${groupId}: ${have.length} of ${size} samples after ${timeoutMs} ms; missing sample indices ${missing.join(', ')}`,
              ),
            );
          },
          (e: Error) => finish(e),
        );
      }, timeoutMs);
      const recheck = setInterval(check, this.recheckMs);
      let set = this.waiters.get(groupId);
      if (!set) this.waiters.set(groupId, (set = new Set()));
      set.add(check);
      check();
    });
  }

  /** Deletes the stored samples of groups whose step is over, their files included. */
  async delete(groupIds: readonly string[]): Promise<void> {
    if (!groupIds.length) return;
    for (const g of groupIds) {
      // Each group's files share one directory; a replaced sample's old file goes with it.
      const dirs = new Set(
        (await this.redis.hvals(keys.group(this.runId, g))).flatMap((v) =>
          isRef(v) ? [dirname((JSON.parse(v) as StoredRef).file.path)] : [],
        ),
      );
      for (const d of dirs) if (basename(d) === groupDirName(g)) rmSync(d, { recursive: true, force: true });
    }
    await this.redis.del(...groupIds.map((g) => keys.group(this.runId, g)));
  }

  async close(): Promise<void> {
    const sub = this.subscriber;
    this.subscriber = undefined;
    if (sub) (await sub).disconnect();
  }

  private async completeOrNull(groupId: string, size: number): Promise<Trajectory[] | null> {
    if ((await this.count(groupId)) < size) return null;
    const samples = await this.read(groupId);
    const bad = samples.findIndex((t, i) => t.sample_index !== i);
    if (samples.length !== size || bad >= 0) {
      throw new Error(`group ${groupId}: expected sample indices 0..${size - 1}, found ${samples.map((t) => t.sample_index).join(', ')}`);
    }
    return samples;
  }

  /** A trajectory as its hash field: inline JSON, or the reference of the file it was written to. */
  private encode(t: Trajectory): string {
    if (!this.files || t.ids.length <= (this.files.inlineMaxTokens ?? 256)) return JSON.stringify(t);
    const { ids, mask, logprobs, ...rest } = t;
    // A fresh name per put: a stored reference never sees its file replaced.
    const path = join(this.files.dataDir, 'groups', groupDirName(t.group_id), `${t.sample_index}.${randomUUID()}.safetensors`);
    const file = writeTokenBatch(
      path,
      { count: 1, row: () => ({ ids, mask, logprobs }) },
      {
        where: `group ${t.group_id} sample ${t.sample_index}`,
        metadata: { trajectory: JSON.stringify(rest) },
      },
    );
    return JSON.stringify({ file } satisfies StoredRef);
  }

  private subscribe(): Promise<Redis> {
    this.subscriber ??= (async () => {
      const sub = this.redis.duplicate();
      // The duplicate's connection errors are the parent connection's, reported where it reports them.
      sub.on('error', (e: Error) => this.redis.listenerCount('error') > 0 && this.redis.emit('error', e));
      sub.on('message', (_channel: string, groupId: string) => {
        for (const wake of this.waiters.get(groupId) ?? []) wake();
      });
      await sub.subscribe(groupChannel(this.runId));
      return sub;
    })();
    return this.subscriber;
  }
}

const isRef = (json: string) => json.startsWith('{"file":');

/** A hash field back as a trajectory; a file is checked against its reference before use. */
function decode(json: string): Trajectory {
  if (!isRef(json)) return JSON.parse(json) as Trajectory;
  const { file } = JSON.parse(json) as StoredRef;
  const cols = readTokenBatch(file);
  const rest = JSON.parse(cols.metadata.trajectory) as Omit<Trajectory, 'ids' | 'mask' | 'logprobs'>;
  return { ...rest, ids: Array.from(cols.ids), mask: Array.from(cols.mask), logprobs: cols.logprobs ? Array.from(cols.logprobs) : [] };
}
