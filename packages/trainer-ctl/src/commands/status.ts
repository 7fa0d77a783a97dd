/**
 * trainer-ctl status RUN_DIR: stage, step, recent metrics, evaluations and live workers of a run;
 * --watch follows it until it is done (redrawn in place on a terminal, a plain line per step in a log).
 */
import { resolve } from 'node:path';
import type { CommandModule } from 'yargs';
import { formatStatus, runStatus, watchStatus } from '../controller/index';
import { RUN_DIR_POSITIONAL } from '../cli-options';

interface StatusArgs {
  'run-dir': string;
  tail: number;
  redis?: string;
  json: boolean;
  watch: boolean;
  interval: number;
}

export const command: CommandModule<object, StatusArgs> = {
  command: 'status <run-dir>',
  describe: "show a run's stage, step, recent metrics and workers alive",
  builder: (y) =>
    y
      .positional('run-dir', RUN_DIR_POSITIONAL)
      .option('tail', { type: 'number', default: 5, describe: 'metrics lines to show' })
      .option('redis', {
        type: 'string',
        describe: 'Redis URL (default THINKFL_REDIS_URL, then the one the run recorded in run.json; REDIS_PASSWORD supplies its password)',
      })
      .option('json', { type: 'boolean', default: false, describe: 'print the status as JSON' })
      .option('watch', {
        type: 'boolean',
        default: false,
        describe: 'follow the run until it is done: redrawn in place on a terminal, one plain line per step otherwise',
      })
      .option('interval', { type: 'number', default: 2, describe: 'seconds between refreshes with --watch' })
      .check((a) => {
        if (a.watch && a.json) throw new Error('--watch and --json do not go together');
        if (!(a.interval > 0)) throw new Error('--interval must be a positive number of seconds');
        return true;
      }),
  handler: async (args) => {
    if (args.watch) {
      await watchStatus(resolve(args['run-dir']), {
        intervalMs: args.interval * 1000,
        stream: process.stdout,
        tail: args.tail,
        redisUrl: args.redis,
      });
      return;
    }
    const s = await runStatus(resolve(args['run-dir']), { tail: args.tail, redisUrl: args.redis });
    process.stdout.write(`${args.json ? JSON.stringify(s, null, 1) : formatStatus(s)}\n`);
  },
};
