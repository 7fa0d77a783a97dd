/**
 * Settings of case derivation, shared by every importer. Importer-specific settings live
 * next to each importer.
 */
import { z } from 'zod';
import { SettingsError } from './errors';
import { formatZodIssues } from '../zod-issues';

export const AnomalySettings = z
  .object({
    /** Anomaly rule by registry name: 'baseline' (default) or 'thinkfl'. */
    rule: z.string().default('baseline').describe("Anomaly rule by registry name: 'baseline' (default) or 'thinkfl'."),
    /** thinkfl: a request is anomalous when its entry latency exceeds this multiple of its endpoint's normal mean (ThinkFL: 100). */
    thinkfl_factor: z
      .number()
      .positive()
      .default(100)
      .describe(
        "thinkfl: a request is anomalous when its entry latency exceeds this multiple of its endpoint's normal mean (ThinkFL: 100).",
      ),
    /** baseline: entry latency counts as slow above this multiple of the endpoint's fault-free mean. Default 3. */
    latency_factor: z
      .number()
      .positive()
      .default(3)
      .describe("baseline: entry latency counts as slow above this multiple of the endpoint's fault-free mean. Default 3."),
    /** baseline: and above the fault-free mean plus this many standard deviations. Default 3 (n-sigma). */
    latency_sigma: z
      .number()
      .nonnegative()
      .default(3)
      .describe('baseline: and above the fault-free mean plus this many standard deviations. Default 3 (n-sigma).'),
    /** baseline: also flag a request when one of its spans is slow against the fault-free duration of its context (same factor and sigma) by at least this many milliseconds; 0 turns the check off. Default 50. */
    span_slowdown_ms: z
      .number()
      .nonnegative()
      .default(50)
      .describe(
        'baseline: also flag a request when one of its spans is slow against the fault-free duration of its context (same factor and sigma) by at least this many milliseconds; 0 turns the check off. Default 50.',
      ),
    /** baseline: also flag a changed call pattern (a usual child call missing, or an unseen one added). Default true. */
    call_pattern: z
      .boolean()
      .default(true)
      .describe('baseline: also flag a changed call pattern (a usual child call missing, or an unseen one added). Default true.'),
    /** Fault-free occurrences a context (endpoint, parent operation) needs before its statistics are trusted. Default 3. */
    min_baseline_count: z
      .number()
      .int()
      .positive()
      .default(3)
      .describe('Fault-free occurrences a context (endpoint, parent operation) needs before its statistics are trusted. Default 3.'),
  })
  .strict();
export type AnomalySettings = z.infer<typeof AnomalySettings>;

export const CaseSettings = z
  .object({
    /** How requests are judged anomalous. */
    anomaly: AnomalySettings.prefault({}).describe('How requests are judged anomalous.'),
    /** Keep only anomalous requests whose trace reaches the ground-truth component (one that never reaches it cannot be localised from its trace). Default true. */
    require_truth_in_trace: z
      .boolean()
      .default(true)
      .describe(
        'Keep only anomalous requests whose trace reaches the ground-truth component (one that never reaches it cannot be localised from its trace). Default true.',
      ),
    /** At most this many cases per fault, chosen deterministically (by a hash of the trace id). Default 50. */
    max_cases_per_fault: z
      .number()
      .int()
      .positive()
      .default(50)
      .describe('At most this many cases per fault, chosen deterministically (by a hash of the trace id). Default 50.'),
  })
  .strict();
export type CaseSettings = z.infer<typeof CaseSettings>;

/** How the import finds gaps in sources whose layout does not say where they recorded (aiops2022, otlp). */
export const GapSettings = z
  .object({
    /** A stretch longer than this many seconds without any span start counts as missing traces. Default 300. */
    max_silence_sec: z
      .number()
      .positive()
      .default(300)
      .describe('A stretch longer than this many seconds without any span start counts as missing traces. Default 300.'),
  })
  .strict();
export type GapSettings = z.infer<typeof GapSettings>;

/** The settings of one import: the importer's own (`importer`), case derivation (`cases`) and gap finding (`gaps`). */
export function importSettings<S extends z.ZodType>(importer: S) {
  return z.strictObject({
    importer: importer
      .prefault({} as z.input<S>)
      .describe("The importer's own settings (each format's are listed in packages/env/src/datasets/README.md)."),
    cases: CaseSettings.prefault({}).describe('How cases are derived from the anomalous requests of each fault window.'),
    gaps: GapSettings.prefault({}).describe('How the import finds stretches the source did not record.'),
  });
}

/** Parses settings with zod, turning issues into one error that names each path (an old camelCase key with its new spelling). */
export function parseSettings<T extends z.ZodType>(schema: T, value: unknown, where: string): z.infer<T> {
  const data = value ?? {};
  const r = schema.safeParse(data);
  if (r.success) return r.data;
  throw new SettingsError(`invalid settings:\n  ${formatZodIssues(r.error, where, { separator: '\n  ', schema, data })}`);
}
