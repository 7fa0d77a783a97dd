/**
 * Starts one worker process's worker (rollout or train) from a run config: the entry point of
 * `trainer-ctl worker` and of the workers trainer-ctl train starts as child processes.
 */
import { hostname } from 'node:os';
import type { RunConfig } from '../config/schema';
import { connectRedis, onAuthFailure, waitReady } from '../queue/connection';
import { PolicyRegistry } from '../queue/policy-registry';
import { parseQueueSettings, type QueueSettingsInput } from '../queue/settings';
import { colocatedSteps } from './colocation';
import { createEpisodePlayer } from './episode-player';
import { dataDir } from './run-files';
import { startRolloutWorker } from './rollout-worker';
import { startTrainWorker } from './train-worker';

export type WorkerKind = 'rollout' | 'train';

export interface StartWorkerOptions {
  kind: WorkerKind;
  config: RunConfig;
  redisUrl: string;
  runDir: string;
  /** Default `<kind>-<host>-<pid>`. */
  workerId?: string;
  /** Rollout jobs played at once. Default workers.rollout.concurrency. */
  concurrency?: number;
  /** Overrides of the queue settings (the prefix comes from queue.prefix). */
  queue?: QueueSettingsInput;
  log?: (line: string) => void;
  /** The worker cannot go on (its train engine died, Redis refused its password, the run directory is full); the caller should close it and exit non-zero. */
  onFatal?: (err: Error) => void;
  /** Aborts a start still waiting for Redis: startWorker then rejects with the signal's reason. */
  signal?: AbortSignal;
}

export interface RunningWorker {
  id: string;
  close(): Promise<void>;
}

/** The run id every queue key of a run config is namespaced by. */
export const runIdOf = (config: RunConfig): string => config.run.name;

export async function startWorker(opts: StartWorkerOptions): Promise<RunningWorker> {
  const { config } = opts;
  const id = opts.workerId ?? `${opts.kind}-${hostname()}-${process.pid}`;
  const log = opts.log ?? (() => undefined);
  const settings = parseQueueSettings({ ...opts.queue, prefix: config.queue.prefix });
  const connection = connectRedis(opts.redisUrl, { log });
  const runId = runIdOf(config);
  try {
    // Nothing is sent before Redis answers: commands would wait in ioredis' queue, past any signal.
    await waitReady(connection, opts.signal);
    onAuthFailure(connection, (e) => opts.onFatal?.(e));
    if (opts.kind === 'train') {
      const w = await startTrainWorker({
        connection,
        runId,
        workerId: id,
        settings,
        config,
        runDir: opts.runDir,
        log,
        onEngineDeath: opts.onFatal,
        aroundStep: colocatedSteps(config, log),
      });
      return { id, close: async () => (await w.close(), connection.disconnect()) };
    }
    const registry = new PolicyRegistry(connection, runId);
    const player = await createEpisodePlayer({ config, registry, log });
    const w = await startRolloutWorker({
      connection,
      runId,
      workerId: id,
      settings,
      concurrency: opts.concurrency ?? config.workers.rollout.concurrency,
      jobTimeoutMs: config.workers.rollout.job_timeout_s * 1000,
      play: player.play,
      files: { dataDir: dataDir(opts.runDir) },
      log,
      onFatal: opts.onFatal,
    });
    return {
      id,
      close: async () => {
        await w.close();
        await player.close();
        connection.disconnect();
      },
    };
  } catch (e) {
    connection.disconnect();
    throw e;
  }
}
