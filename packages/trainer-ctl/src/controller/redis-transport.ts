/**
 * ControlTransport on the run's Redis through the queue wrappers (queue/): rollout jobs in,
 * complete groups out of the group store, one train job per update. Ids derive from (group,
 * sample) and from the update index, so a step replayed after a kill adds nothing twice:
 * samples already stored are not played again, and an update that already ran answers with
 * its stored result.
 */
import type { Redis } from 'ioredis';
import {
  connectRedis,
  GroupStore,
  listWorkers,
  keys,
  parseQueueSettings,
  RedisErrorReporter,
  RolloutQueue,
  TrainQueue,
  type QueueSettingsInput,
  type RolloutJob,
  type TrainJob,
  type TrainResult,
  type TrainSample,
  type Trajectory,
  type WorkerBeat,
} from '../queue/index';
import type { ControlTransport } from './transport';

export class RedisTransport implements ControlTransport {
  readonly redis: Redis;
  private readonly rollouts: RolloutQueue;
  private readonly groups: GroupStore;
  private readonly trainQueue: TrainQueue;
  private readonly sizes = new Map<string, number>();

  constructor(
    readonly url: string,
    readonly runId: string,
    settings: QueueSettingsInput = {},
    /** Where connection errors go (once per outage); default stderr. */
    log: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
    /** The run's shared data directory: train jobs' samples go there as step files. Absent: inline in the job. */
    dataDir?: string,
  ) {
    const s = parseQueueSettings(settings);
    const errors = new RedisErrorReporter(log);
    this.redis = errors.watchClient(connectRedis(url));
    this.rollouts = new RolloutQueue(this.redis, runId, s);
    this.groups = new GroupStore(this.redis, runId);
    this.trainQueue = new TrainQueue(this.redis, runId, s, dataDir);
    errors.watch(this.rollouts.queue);
    errors.watch(this.trainQueue.queue);
  }

  /**
   * For a controller that owns every worker of the run, none of which is running yet: drops
   * every job of both queues (a killed worker's running job would otherwise wait for its lock
   * to expire, and a failed one would answer again with its failure) and the published
   * policy (the train worker publishes the one it resumes from; a newer one left from past
   * that checkpoint must not be played). Stored trajectories, train results and the
   * diversity cache stay: the steps replayed from here reuse them.
   */
  async resetForStart(): Promise<void> {
    await this.rollouts.queue.obliterate({ force: true });
    await this.trainQueue.queue.obliterate({ force: true });
    await this.redis.del(keys.policy(this.runId));
  }

  /**
   * Drops rollout jobs still waiting from an earlier controller of the run: the steps it left
   * unfinished are enqueued again as needed, and anything else would only keep workers busy.
   */
  async discardWaitingRollouts(): Promise<void> {
    await this.rollouts.queue.drain(true);
  }

  async enqueueRollouts(jobs: RolloutJob[]): Promise<void> {
    const stored = await this.groups.indicesOf([...new Set(jobs.map((j) => j.group_id))]);
    for (const j of jobs) this.sizes.set(j.group_id, Math.max(this.sizes.get(j.group_id) ?? 0, j.sample_index + 1));
    const todo = jobs.filter((j) => !stored.get(j.group_id)!.includes(j.sample_index));
    if (todo.length) await this.rollouts.enqueueGroup(todo);
  }

  waitGroup(groupId: string, size: number, timeoutMs: number): Promise<Trajectory[]> {
    return this.groups.waitComplete(groupId, size, timeoutMs);
  }

  stageTrainRows(update: number, samples: TrainSample[], maxGroups: number): void {
    this.trainQueue.stage(update, samples, maxGroups);
  }

  async train(job: TrainJob, timeoutMs: number): Promise<TrainResult> {
    await this.trainQueue.submit(job);
    const result = await this.trainQueue.waitResult(job.update, timeoutMs);
    // A job read while still active can report 'completed' a moment later with the stale empty
    // return value; reading it again gets the stored one.
    return result ?? this.trainQueue.waitResult(job.update, timeoutMs);
  }

  async dropGroups(groupIds: string[]): Promise<void> {
    await this.groups.delete(groupIds);
    await this.rollouts.dropGroups(groupIds.map((groupId) => ({ groupId, size: this.sizes.get(groupId) ?? 0 })));
    for (const g of groupIds) this.sizes.delete(g);
  }

  workers(): Promise<WorkerBeat[]> {
    return listWorkers(this.redis, this.runId);
  }

  async close(): Promise<void> {
    await Promise.all([this.rollouts.close(), this.trainQueue.close(), this.groups.close()]);
    // While Redis is down a QUIT would wait for it to come back.
    if (this.redis.status === 'ready') await this.redis.quit();
    else this.redis.disconnect();
  }
}
