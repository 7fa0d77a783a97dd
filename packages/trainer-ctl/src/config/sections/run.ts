/** run: the run's identity and where its files go. */
import { z } from 'zod';
import { ExpectationSchema } from './expect';

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
    expect: z
      .array(ExpectationSchema)
      .default([])
      .describe(
        'Thresholds checked when the run completes (and on a re-run of a completed run): each is reported, junit.xml is ' +
          'written beside metrics.jsonl, and the run exits non-zero naming every failed one. Default none.',
      ),
  })
  .describe('The run: name, directories, seed.');
