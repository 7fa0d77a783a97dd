/**
 * trainer-ctl train run.yaml: runs the three stages of a run config (SFT + GRPO stage 1,
 * stage 2, stage 3), each ending with a checkpoint and an evaluation; --resume continues a
 * killed run from its last completed step; --redis uses a given server and external workers.
 */
import type { CommandModule } from 'yargs';
import { RunStopped, trainRun } from '../controller/index';
import { RUN_DIR_OPTION } from '../cli-options';

interface TrainArgs {
  config: string;
  'run-dir'?: string;
  redis?: string;
  resume: boolean;
}

export const command: CommandModule<object, TrainArgs> = {
  command: 'train <config>',
  describe: 'run a staged GRPO training run described by a run config (YAML)',
  builder: (y) =>
    y
      .positional('config', { type: 'string', demandOption: true, describe: 'run config YAML (e.g. configs/tiny-cpu.yaml)' })
      .option('run-dir', RUN_DIR_OPTION)
      .option('redis', {
        type: 'string',
        describe:
          'Redis URL of the queues (default THINKFL_REDIS_URL, then queue.redis_url; REDIS_PASSWORD supplies a password the URL lacks); ' +
          'workers are then started separately with `trainer-ctl worker rollout|train`',
      })
      .option('resume', { type: 'boolean', default: false, describe: "continue the run directory's run from its last completed step" }),
  handler: async (args) => {
    try {
      await trainRun({ configFile: args.config, runDir: args['run-dir'], redisUrl: args.redis, resume: args.resume });
    } catch (e) {
      if (!(e instanceof RunStopped)) throw e;
      // One message; what the stopped run was still awaiting must not keep the process alive.
      process.stderr.write(`trainer-ctl: ${e.message}\n`);
      process.exit(e.exitCode);
    }
  },
};
