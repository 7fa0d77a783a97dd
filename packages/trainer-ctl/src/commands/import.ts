/**
 * trainer-ctl import: turns raw telemetry (nezha, aiops2022, otlp) into the environment's
 * dataset directory. Progress and a warning per gap go to stderr, the per-fault summary to
 * stdout; --strict makes any gap an error.
 */
import { readFileSync } from 'node:fs';
import type { CommandModule } from 'yargs';
import { parse } from 'yaml';
import { formatImportSummary, gapLines, importDataset, importers, SettingsError } from '@thinkfl/env';

interface ImportArgs {
  format: string;
  src: string;
  out: string;
  date?: string;
  settings?: string;
  rule?: string;
  'max-cases'?: number;
  strict?: boolean;
}

export const command: CommandModule<object, ImportArgs> = {
  command: 'import',
  describe: 'import raw telemetry into a dataset directory (cases derived per fault)',
  builder: (y) =>
    y
      .option('format', { type: 'string', demandOption: true, choices: Object.keys(importers), describe: 'source format' })
      .option('src', { type: 'string', demandOption: true, describe: 'source directory (nezha: the tgz files or an extracted tree)' })
      .option('out', { type: 'string', demandOption: true, describe: 'dataset directory to write' })
      .option('date', { type: 'string', describe: 'nezha: day to import (YYYY-MM-DD)' })
      .option('settings', { type: 'string', describe: 'YAML file with `importer:`, `cases:` and `gaps:` settings' })
      .option('rule', { type: 'string', describe: 'anomaly rule (overrides cases.anomaly.rule)' })
      .option('max-cases', { type: 'number', describe: 'cases per fault at most (overrides cases.max_cases_per_fault)' })
      .option('strict', {
        type: 'boolean',
        default: false,
        describe: 'fail on any gap in the source (missing minutes, fault-free day, parts) instead of importing around it',
      }),
  handler: async (args) => {
    const file = args.settings ? (parse(readFileSync(args.settings, 'utf8')) ?? {}) : {};
    if (typeof file !== 'object' || Array.isArray(file)) throw new Error(`${args.settings}: settings must be a mapping`);
    const importer = { ...(file.importer ?? {}), ...(args.date ? { date: args.date } : {}) };
    const cases = { ...(file.cases ?? {}) };
    const gaps = { ...(file.gaps ?? {}) };
    if (args['max-cases'] !== undefined) cases.max_cases_per_fault = args['max-cases'];
    if (args.rule) cases.anomaly = { ...(cases.anomaly ?? {}), rule: args.rule };
    const t0 = Date.now();
    const dataset = await importDataset({
      format: args.format,
      src: args.src,
      out: args.out,
      settings: { ...file, importer, cases, gaps },
      strict: args.strict,
      onProgress: (m) => process.stderr.write(`[${((Date.now() - t0) / 1000).toFixed(1)}s] ${m}\n`),
    }).catch((e: Error) => {
      // The paths a settings error names are those of the settings file (the flags override keys of it).
      throw e instanceof SettingsError && args.settings ? new SettingsError(`${args.settings}: ${e.message}`) : e;
    });
    for (const line of gapLines(dataset.meta.gaps)) process.stderr.write(`warning: ${line}\n`);
    process.stdout.write(`${formatImportSummary(dataset)}\nwritten to ${args.out}\n`);
  },
};
