/**
 * `trainer-ctl config validate FILE...`: checks run configs (schema, then input paths, then the
 * memory estimate against the GPUs a config declares) without doing any work; `trainer-ctl config schema`: prints the JSON Schema for editors
 * (configs/run.schema.json is this output).
 */
import type { CommandModule } from 'yargs';
import { stringify } from 'yaml';
import { ConfigError, loadRunConfig, runConfigJsonSchema } from '../config/index';
import { estimateMemory, formatMemoryEstimate } from '../config/memory';

interface ValidateArgs {
  files: string[];
  paths: boolean;
  print: boolean;
}

const validate: CommandModule<object, ValidateArgs> = {
  command: 'validate <files..>',
  describe: 'validate run config files; errors name file, line and YAML path',
  builder: (y) =>
    y
      .positional('files', { type: 'string', array: true, demandOption: true, describe: 'run config YAML files' })
      .option('paths', {
        type: 'boolean',
        default: true,
        describe: 'check that dataset, model and other input paths exist (--no-paths to skip)',
      })
      .option('print', { type: 'boolean', default: false, describe: 'print each config with every default applied' }),
  handler: (argv) => {
    let failed = 0;
    for (const file of argv.files) {
      try {
        const { config, runDir } = loadRunConfig(file, { checkPaths: argv.paths });
        if (config.resources !== undefined) {
          const estimate = estimateMemory(config);
          process.stdout.write(`${file}: memory estimate (lower bound)\n${formatMemoryEstimate(estimate)}`);
          if (estimate.problems.length > 0) {
            throw new ConfigError(
              file,
              estimate.problems.map((message) => ({ path: 'resources', message })),
            );
          }
        }
        process.stdout.write(`${file}: ok (run ${config.run.name}, run directory ${runDir})\n`);
        if (argv.print) process.stdout.write(stringify(config));
      } catch (e) {
        failed++;
        process.stderr.write(`${(e as Error).message}\n`);
      }
    }
    if (failed > 0) process.exitCode = 1;
  },
};

const schema: CommandModule = {
  command: 'schema',
  describe: 'print the JSON Schema of run configs (for editors)',
  handler: () => {
    process.stdout.write(`${JSON.stringify(runConfigJsonSchema(), null, 2)}\n`);
  },
};

export const command: CommandModule = {
  command: 'config <command>',
  describe: 'run config tools: validate, schema',
  builder: (y) =>
    y
      .command(validate as unknown as CommandModule)
      .command(schema)
      .demandCommand(1),
  handler: () => undefined,
};
