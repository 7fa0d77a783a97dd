/**
 * trainer-ctl worker rollout|train: joins a run's queues on a given Redis as a rollout worker
 * (plays episodes) or the train worker (owns the engine). Logs go to stderr, Redis URLs
 * redacted. SIGTERM or SIGINT stops taking jobs, lets running ones finish for up to
 * STOP_GRACE_MS and exits 0 (a job cut off is retried by another worker once its lock
 * expires); a signal while Redis is still unreachable stops at once. A refused Redis password
 * or a dead train engine exits 1 with one line. `worker train --node-rank K` (K > 0) on the other
 * nodes of a multi-node engine (workers.train.nodes) serves that node's ranks and needs no Redis.
 */
import type { CommandModule } from 'yargs';
import { loadRunConfig } from '../config/load';
import type { RunConfig } from '../config/schema';
import { RedisAuthError } from '../queue/connection';
import { REDIS_PASSWORD_ENV, REDIS_URL_ENV, redactSecrets, resolveRedisUrl } from '../queue/redis-url';
import { startWorker, type WorkerKind } from '../workers/start';
import { startTrainNode } from '../workers/train-node';
import { RUN_DIR_OPTION } from '../cli-options';

/** After a signal the worker is gone within this time, whatever it was doing, ms. */
const STOP_GRACE_MS = 8000;

interface WorkerArgs {
  kind: WorkerKind;
  config: string;
  redis?: string;
  'run-dir'?: string;
  id?: string;
  concurrency?: number;
  'lock-duration-ms'?: number;
  'stalled-interval-ms'?: number;
  'node-rank'?: number;
}

export const command: CommandModule<object, WorkerArgs> = {
  command: 'worker <kind>',
  describe: `run a rollout or train worker on a run's queues (Redis from --redis, ${REDIS_URL_ENV} or queue.redis_url)`,
  builder: (y) =>
    y
      .positional('kind', { choices: ['rollout', 'train'] as const, demandOption: true, describe: 'which worker' })
      .option('config', { type: 'string', demandOption: true, describe: 'the run config (YAML)' })
      .option('redis', {
        type: 'string',
        describe: `Redis URL of the run (default ${REDIS_URL_ENV}, then queue.redis_url); keep the password out of it: ${REDIS_PASSWORD_ENV} supplies it`,
      })
      .option('run-dir', RUN_DIR_OPTION)
      .option('id', { type: 'string', describe: "worker id in the run's worker registry (default <kind>-<host>-<pid>)" })
      .option('concurrency', { type: 'number', describe: 'rollout jobs played at once (default workers.rollout.concurrency)' })
      .option('lock-duration-ms', {
        type: 'number',
        describe: "job lock lifetime; a dead worker's job is retried after it (default 30000)",
      })
      .option('stalled-interval-ms', { type: 'number', describe: 'how often to look for jobs of dead workers (default 30000)' })
      .option('node-rank', {
        type: 'number',
        describe:
          "train: this node's index among workers.train.nodes (default workers.train.node_rank); above 0 it serves its node's ranks of the engine and takes no jobs",
      })
      .check((a) => {
        if (a['node-rank'] !== undefined && (!Number.isInteger(a['node-rank']) || a['node-rank'] < 0))
          throw new Error('--node-rank must be an integer >= 0');
        // Checked here, so that the error names the flag and not the queue setting it fills.
        for (const flag of ['lock-duration-ms', 'stalled-interval-ms'] as const) {
          const v = a[flag];
          if (v !== undefined && (!Number.isInteger(v) || v < 100)) throw new Error(`--${flag} must be an integer >= 100 (ms), got ${v}`);
        }
        if (a['node-rank'] !== undefined && a.kind !== 'train') throw new Error('--node-rank is for `worker train`');
        if (a.concurrency !== undefined && (!Number.isInteger(a.concurrency) || a.concurrency < 1))
          throw new Error('--concurrency must be a positive integer');
        return true;
      }),
  handler: async (args) => {
    const loaded = loadRunConfig(args.config);
    const nodeRank = args['node-rank'] ?? loaded.config.workers.train.node_rank;
    if (args.kind === 'train' && nodeRank > 0) return serveNode(loaded.config, nodeRank);
    const redisUrl = resolveRedisUrl(args.redis, loaded.config.queue.redis_url);
    if (!redisUrl) throw new Error(`worker: give --redis URL or ${REDIS_URL_ENV} (the run config has queue.redis_url: null)`);
    const tag = `[worker ${args.kind} ${process.pid}]`;
    const log = (line: string) => process.stderr.write(`${tag} ${redactSecrets(line)}\n`);
    // Listening before the (slow) start: a signal during it stops it.
    const stop = new AbortController();
    let wake: () => void = () => undefined;
    const onSignal = (why: string) => {
      if (stop.signal.aborted) return;
      stop.abort(new Error(why));
      wake();
      setTimeout(() => {
        log(`${why}: not closed after ${STOP_GRACE_MS} ms; exiting`);
        process.exit(process.exitCode ?? 0);
      }, STOP_GRACE_MS).unref();
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    try {
      let w: Awaited<ReturnType<typeof startWorker>>;
      try {
        w = await startWorker({
          kind: args.kind,
          config: loaded.config,
          redisUrl,
          runDir: args['run-dir'] ?? loaded.runDir,
          ...(args.id !== undefined && { workerId: args.id }),
          ...(args.concurrency !== undefined && { concurrency: args.concurrency }),
          queue: {
            ...(args['lock-duration-ms'] !== undefined && { lockDurationMs: args['lock-duration-ms'] }),
            ...(args['stalled-interval-ms'] !== undefined && { stalledIntervalMs: args['stalled-interval-ms'] }),
          },
          log,
          onFatal: (e) => {
            log(`fatal: ${e.message}`);
            process.exitCode = 1;
            onSignal('fatal error');
          },
          signal: stop.signal,
        });
      } catch (e) {
        if (e instanceof RedisAuthError) {
          log(`fatal: ${e.message}`);
          process.exitCode = 1;
          return;
        }
        if (stop.signal.aborted) {
          log(`${(stop.signal.reason as Error).message}: stopped before the worker was ready`);
          return;
        }
        throw e;
      }
      log(`${w.id} ready on ${redisUrl} (run ${loaded.config.run.name})`);
      if (!stop.signal.aborted) await new Promise<void>((resolve) => (wake = resolve));
      log(`${(stop.signal.reason as Error).message}: closing`);
      await w.close().catch((e: Error) => log(`close failed: ${e.message}`));
      log('stopped');
    } finally {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
    }
  },
};

/** Another node's ranks of a multi-node engine, until SIGTERM or SIGINT. */
async function serveNode(config: RunConfig, nodeRank: number): Promise<void> {
  const tag = `[worker train node ${nodeRank} ${process.pid}]`;
  const log = (line: string) => process.stderr.write(`${tag} ${redactSecrets(line)}\n`);
  const node = startTrainNode(config, nodeRank, log);
  const why = await new Promise<string>((resolve) => {
    process.once('SIGTERM', () => resolve('SIGTERM'));
    process.once('SIGINT', () => resolve('SIGINT'));
  });
  log(`${why}: stopping this node's ranks`);
  await node.close();
  log('stopped');
}
