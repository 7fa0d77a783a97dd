/**
 * trainer-ctl worker rollout|train: joins a run's queues on a given Redis as a rollout worker
 * (plays episodes) or the train worker (owns the engine). Logs go to stderr; SIGTERM or SIGINT
 * stops taking jobs, lets running ones finish and exits 0; a dead train engine exits 1.
 */
import type { CommandModule } from 'yargs';
import { loadRunConfig } from '../config/load';
import { startWorker, type WorkerKind } from '../workers/start';

interface WorkerArgs {
  kind: WorkerKind;
  config: string;
  redis?: string;
  'run-dir'?: string;
  id?: string;
  concurrency?: number;
  'lock-duration-ms'?: number;
  'stalled-interval-ms'?: number;
}

export const command: CommandModule<object, WorkerArgs> = {
  command: 'worker <kind>',
  describe: 'run a rollout or train worker on a run\'s queues (Redis from --redis or queue.redis_url)',
  builder: (y) =>
    y
      .positional('kind', { choices: ['rollout', 'train'] as const, demandOption: true, describe: 'which worker' })
      .option('config', { type: 'string', demandOption: true, describe: 'the run config (YAML)' })
      .option('redis', { type: 'string', describe: 'Redis URL of the run (default queue.redis_url of the config)' })
      .option('run-dir', { type: 'string', describe: 'run directory (default <run.output_dir>/<run.name>)' })
      .option('id', { type: 'string', describe: 'worker id in the run\'s worker registry (default <kind>-<host>-<pid>)' })
      .option('concurrency', { type: 'number', describe: 'rollout jobs played at once (default workers.rollout.concurrency)' })
      .option('lock-duration-ms', { type: 'number', describe: 'job lock lifetime; a dead worker\'s job is retried after it (default 30000)' })
      .option('stalled-interval-ms', { type: 'number', describe: 'how often to look for jobs of dead workers (default 30000)' })
      .check((a) => {
        if (a.concurrency !== undefined && (!Number.isInteger(a.concurrency) || a.concurrency < 1)) throw new Error('--concurrency must be a positive integer');
        return true;
      }),
  handler: async (args) => {
    const loaded = loadRunConfig(args.config);
    const redisUrl = args.redis ?? loaded.config.queue.redis_url;
    if (!redisUrl) throw new Error('worker: give --redis URL (the run config has queue.redis_url: null)');
    const tag = `[worker ${args.kind} ${process.pid}]`;
    const log = (line: string) => process.stderr.write(`${tag} ${line}\n`);
    // Listening before the (slow) start: a signal during it still ends in a clean close.
    let signal: string | undefined;
    let wake: () => void = () => undefined;
    const onSignal = (sig: string) => {
      signal ??= sig;
      wake();
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
    const w = await startWorker({
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
    });
    log(`${w.id} ready on ${redisUrl} (run ${loaded.config.run.name})`);
    if (signal === undefined) await new Promise<void>((resolve) => (wake = resolve));
    log(`${signal}: closing`);
    await w.close().catch((e: Error) => log(`close failed: ${e.message}`));
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    log('stopped');
  },
};
