/** run: the run's identity and where its files go. */
import { z } from 'zod';

export const RunSection = z
  .strictObject({
    name: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, 'letters, digits, ".", "_" and "-" only')
      .describe('Name of the run; the run directory is <output_dir>/<name> and queue keys are prefixed with it. Required.'),
    base_dir: z
      .string()
      .default('.')
      .describe(
        'Directory every relative path of this file resolves against, itself relative to the YAML file. ' +
          'Default "." (the YAML file\'s directory); the presets in configs/ use ".." (the repository root).',
      ),
    output_dir: z
      .string()
      .default('runs')
      .describe('Parent of run directories (checkpoints, embedded Redis data, metrics, logs). Default runs.'),
    seed: z
      .number()
      .int()
      .min(0)
      .default(0)
      .describe('Seed of case sampling, the case split default and the samplers (each sample derives its own). Default 0.'),
  })
  .describe('The run: name, directories, seed.');
