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
    rule: z.string().default('baseline'),
    /** thinkfl: a request is anomalous when its entry latency exceeds this multiple of its endpoint's normal mean (ThinkFL: 100). */
    thinkflFactor: z.number().positive().default(100),
    /** baseline: entry latency counts as slow above this multiple of the endpoint's fault-free mean. Default 3. */
    latencyFactor: z.number().positive().default(3),
    /** baseline: and above the fault-free mean plus this many standard deviations. Default 3 (n-sigma). */
    latencySigma: z.number().nonnegative().default(3),
    /** baseline: also flag a request when one of its spans is slow against the fault-free duration of its context (same factor and sigma) by at least this many milliseconds; 0 turns the check off. Default 50. */
    spanSlowdownMs: z.number().nonnegative().default(50),
    /** baseline: also flag a changed call pattern (a usual child call missing, or an unseen one added). Default true. */
    callPattern: z.boolean().default(true),
    /** Fault-free occurrences a context (endpoint, parent operation) needs before its statistics are trusted. Default 3. */
    minBaselineCount: z.number().int().positive().default(3),
  })
  .strict();
export type AnomalySettings = z.infer<typeof AnomalySettings>;

export const CaseSettings = z
  .object({
    /** How requests are judged anomalous. */
    anomaly: AnomalySettings.prefault({}),
    /** Keep only anomalous requests whose trace reaches the ground-truth component (one that never reaches it cannot be localised from its trace). Default true. */
    requireTruthInTrace: z.boolean().default(true),
    /** At most this many cases per fault, chosen deterministically (by a hash of the trace id). Default 50. */
    maxCasesPerFault: z.number().int().positive().default(50),
  })
  .strict();
export type CaseSettings = z.infer<typeof CaseSettings>;

/** How the import finds gaps in sources whose layout does not say where they recorded (aiops2022, otlp). */
export const GapSettings = z
  .object({
    /** A stretch longer than this many seconds without any span start counts as missing traces. Default 300. */
    max_silence_sec: z.number().positive().default(300),
  })
  .strict();
export type GapSettings = z.infer<typeof GapSettings>;

/** Parses settings with zod, turning issues into one error that names each path. */
export function parseSettings<T extends z.ZodType>(schema: T, value: unknown, where: string): z.infer<T> {
  const r = schema.safeParse(value ?? {});
  if (r.success) return r.data;
  throw new SettingsError(`invalid settings:\n  ${formatZodIssues(r.error, where, { separator: '\n  ' })}`);
}
