/** `trainer-ctl push RUN_DIR --repo ID`: a run's checkpoint and a model card with its evaluation table to the Hugging Face Hub (HF_TOKEN, HF_ENDPOINT). */
import type { CommandModule } from 'yargs';
import { hubAccess, pushRun } from '../hub/index';

interface Args {
  run_dir: string;
  repo: string;
  from?: string;
  public: boolean;
  'base-model'?: string;
}

export const command: CommandModule<object, Args> = {
  command: 'push <run_dir>',
  describe: "upload a run's newest checkpoint (or --from DIR) with a model card carrying its evaluation table to the Hugging Face Hub",
  builder: (y) =>
    y
      .positional('run_dir', { type: 'string', demandOption: true, describe: 'run directory' })
      .option('repo', { type: 'string', demandOption: true, describe: 'hub repository id, <org>/<name>' })
      .option('from', {
        type: 'string',
        describe: 'directory to upload (default: checkpoints/update-N, else adapters/vN or policies/vN, newest)',
      })
      .option('public', { type: 'boolean', default: false, describe: 'create the repository public (default private)' })
      .option('base-model', { type: 'string', describe: "backbone's hub id for the card's base_model" }),
  handler: async (args) => {
    const out = await pushRun({
      ...hubAccess(),
      runDir: args.run_dir,
      repo: args.repo,
      private: !args.public,
      ...(args.from ? { from: args.from } : {}),
      ...(args['base-model'] ? { baseModel: args['base-model'] } : {}),
      log: (l) => process.stderr.write(`${l}\n`),
    });
    process.stdout.write(`pushed ${out.files.length} files to ${args.repo}${out.commit ? ` at ${out.commit}` : ''}\n`);
  },
};
