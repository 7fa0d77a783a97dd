/** dataset: an imported dataset directory and how its cases split into train and eval. */
import { importers, importSettings } from '@thinkfl/env';
import { z } from 'zod';

/** One form of dataset.import per importer of the registry, its settings validated with the rest of the run config. */
const [first, ...rest] = Object.values(importers).map((imp) =>
  z.strictObject({
    format: z.literal(imp.name).describe(`Importer of the raw telemetry (as \`trainer-ctl import --format\`): ${imp.describe}`),
    src: z.string().min(1).describe('Raw telemetry directory, relative to run.base_dir like every path here.'),
    settings: importSettings(imp.settings)
      .prefault({})
      .describe(
        "Import settings as `trainer-ctl import --settings` takes them: importer (the format's own), cases, gaps. " +
          "Default {} (the importer's defaults).",
      ),
  }),
);
const importBranches = [first, ...rest] as const;

export const DatasetSection = z
  .strictObject({
    path: z
      .string()
      .min(1)
      .describe(
        'Directory of a dataset imported with `trainer-ctl import` (e.g. .cache/datasets/nezha-2023-01-29). ' +
          'Checked to exist before any work. Required.',
      ),
    split: z
      .strictObject({
        by: z
          .enum(['fault', 'case'])
          .default('fault')
          .describe(
            'Unit of the split. fault: all cases of a fault fall on one side, so evaluation never sees a fault ' +
              'trained on; case: cases split independently. Default fault.',
          ),
        eval_fraction: z
          .number()
          .min(0)
          .lt(1)
          .default(0.3)
          .describe('Share of faults (or cases) held out for evaluation, 0 to <1. Default 0.3.'),
        seed: z.number().int().min(0).optional().describe('Seed of the split. Default run.seed.'),
      })
      .prefault({})
      .describe('Train/eval split of the cases.'),
    import: z
      .discriminatedUnion('format', importBranches)
      .optional()
      .describe(
        'Where `trainer-ctl train` imports the dataset from when dataset.path holds none yet (a fresh clone) or one an ' +
          'older importer wrote, as { format, src, settings }. Default none: the dataset must have been imported.',
      ),
    max_eval_cases: z
      .number()
      .int()
      .positive()
      .optional()
      .describe(
        'Evaluate on at most this many held-out cases, taken round-robin over the held-out faults so that each ' +
          'fault keeps a case as long as there are enough (per-fault figures stay per fault). Default all.',
      ),
    max_cases_per_fault: z
      .number()
      .int()
      .positive()
      .optional()
      .describe('Use at most this many cases of each fault (so that faults with many anomalous requests do not dominate). Default all.'),
  })
  .describe('The failure cases episodes are played on.');
