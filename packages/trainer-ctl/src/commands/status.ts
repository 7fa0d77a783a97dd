/** trainer-ctl status RUN_DIR: stage, step, recent metrics, evaluations and live workers of a run. */
import { resolve } from 'node:path';
import type { CommandModule } from 'yargs';
import { formatStatus, runStatus } from '../controller/index';

interface StatusArgs {
  'run-dir': string;
  tail: number;
  redis?: string;
  json: boolean;
}

export const command: CommandModule<object, StatusArgs> = {
  command: 'status <run-dir>',
  describe: 'show a run\'s stage, step, recent metrics and workers alive',
  builder: (y) =>
    y
      .positional('run-dir', { type: 'string', demandOption: true, describe: 'the run directory (runs/<run.name>)' })
      .option('tail', { type: 'number', default: 5, describe: 'metrics lines to show' })
      .option('redis', { type: 'string', describe: 'Redis URL (default THINKFL_REDIS_URL, then the one the run recorded in run.json; REDIS_PASSWORD supplies its password)' })
      .option('json', { type: 'boolean', default: false, describe: 'print the status as JSON' }),
  handler: async (args) => {
    const s = await runStatus(resolve(args['run-dir']), { tail: args.tail, redisUrl: args.redis });
    process.stdout.write(`${args.json ? JSON.stringify(s, null, 1) : formatStatus(s)}\n`);
  },
};
