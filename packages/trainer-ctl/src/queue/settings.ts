/** Settings of the BullMQ queues and the waits around them (retries, stalled-job detection, polling). */
import { z } from 'zod';
import { formatZodIssues } from '@thinkfl/env';

export const QueueSettingsSchema = z.strictObject({
  /** BullMQ key prefix of the run's queues (the run config's queue.prefix). Default thinkfl. */
  prefix: z
    .string()
    .regex(/^[A-Za-z0-9._-]+$/)
    .default('thinkfl'),
  /** Tries of a job whose handler throws before it fails for good. Default 3. */
  attempts: z.number().int().min(1).default(3),
  /** Base delay of the exponential backoff between tries, ms. Default 1000. */
  backoffMs: z.number().int().min(0).default(1000),
  /**
   * How long a worker's lock on a running job lasts between renewals, ms. A worker that dies
   * (SIGKILL) stops renewing; its job counts as stalled once the lock has expired. Default 30000 (BullMQ's).
   */
  lockDurationMs: z.number().int().min(100).default(30_000),
  /** How often every worker looks for stalled jobs and puts them back in the queue, ms. Default 30000 (BullMQ's). */
  stalledIntervalMs: z.number().int().min(100).default(30_000),
  /** Times a job may be put back after its worker died before it fails. Default 2. */
  maxStalledCount: z.number().int().min(0).default(2),
  /** Interval of polling a train job's state while waiting for its result, ms. Default 200. */
  pollMs: z.number().int().min(10).default(200),
  /** Interval of worker heartbeats in the run's worker registry, ms. Default 5000. */
  heartbeatMs: z.number().int().min(100).default(5000),
});

export type QueueSettingsInput = z.input<typeof QueueSettingsSchema>;
export type QueueSettings = z.output<typeof QueueSettingsSchema>;

/** Parses queue settings; errors name the offending key under `path`. */
export function parseQueueSettings(input: unknown, path = 'queue'): QueueSettings {
  const r = QueueSettingsSchema.safeParse(input ?? {});
  if (r.success) return r.data;
  throw new Error(`invalid queue settings: ${formatZodIssues(r.error, path)}`);
}
