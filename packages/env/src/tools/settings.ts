/** Settings of the environment tools: thresholds, windows, observation bounds. */
import { z } from 'zod';
import { formatZodIssues } from '../zod-issues';

export const TIMESTAMP_FORMATS = ['unix_s', 'unix_ms', 'unix_us', 'unix_ns', 'iso8601'] as const;
export type TimestampFormat = (typeof TIMESTAMP_FORMATS)[number];

export const ToolSettingsSchema = z
  .object({
    /** n of the n-sigma band: a metric value fluctuates when |m(t) - mu| > n*sigma (ThinkFL Eq. 6-7). Default 3 (RCLAgent's n). */
    n_sigma: z
      .number()
      .positive()
      .default(3)
      .describe(
        'n of the n-sigma band: a metric value fluctuates when |m(t) - mu| > n*sigma (ThinkFL Eq. 6-7, which gives no n). Default 3 (RCLAgent sets n = 3).',
      ),
    /** delta of ThinkFL Eq. 7: half-width of the inspected window [t - delta, t + delta] of search_fluctuating_metrics, seconds. Default 600 (the paper gives none). */
    metric_delta_s: z
      .number()
      .positive()
      .default(600)
      .describe(
        'delta of ThinkFL Eq. 7: half-width of the inspected window [t - delta, t + delta] of search_fluctuating_metrics, seconds. Default 600 (the paper gives none).',
      ),
    /**
     * Half-width of the baseline window [t - W, t + W] whose values outside the inspected window
     * give the regular mean and std (ThinkFL Eq. 6), seconds. Must exceed metric_delta_s. Default 1200.
     */
    baseline_window_s: z
      .number()
      .positive()
      .default(1200)
      .describe(
        'Half-width of the baseline window [t - W, t + W] whose values outside the inspected window give the regular mean and std mu, sigma (ThinkFL Eq. 6), seconds. Must exceed metric_delta_s. Default 1200.',
      ),
    /** Fewest baseline points a series needs to be judged at all. Default 3. */
    min_baseline_points: z
      .number()
      .int()
      .min(2)
      .default(3)
      .describe('Fewest baseline points a series needs to be judged at all. Default 3.'),
    /**
     * Floor of sigma as a fraction of |mu|, so that a series that was flat in the baseline does
     * not flag every tiny change as infinitely many sigmas. Default 0.01.
     */
    std_floor_ratio: z
      .number()
      .min(0)
      .default(0.01)
      .describe(
        'Floor of sigma as a fraction of |mu|, so that a series that was flat in the baseline does not flag every tiny change as infinitely many sigmas. Default 0.01.',
      ),
    /** Half-width of the window of search_logs around t, seconds. Default 300. */
    log_delta_s: z
      .number()
      .positive()
      .default(300)
      .describe("Half-width of the window of search_logs around t, seconds (the project's log tool; ThinkFL has none). Default 300."),
    /**
     * Half-width of the window of search_logs in which a usual log statement (any level) counts
     * as silent, seconds: an exception skips the statements after the throw, so a line the
     * service usually writes stops. Narrower than log_delta_s, since a fault lasts minutes. Default 60.
     */
    silent_window_s: z
      .number()
      .positive()
      .default(60)
      .describe(
        'Half-width of the window of search_logs in which a usual log statement (any level) counts as silent, seconds: an exception skips the statements after the throw, so a line the service usually writes stops. Narrower than log_delta_s, since a fault lasts minutes. Default 60.',
      ),
    /** Fewest lines the usual rate must predict in that window before its absence means anything. Default 5. */
    silent_min_expected: z
      .number()
      .positive()
      .default(5)
      .describe('Fewest lines the usual rate must predict in that window before its absence means anything. Default 5.'),
    /** A usual statement is silent when its lines in the window are at most this fraction of the predicted count. Default 0.2. */
    silent_max_ratio: z
      .number()
      .min(0)
      .lt(1)
      .default(0.2)
      .describe('A usual statement is silent when its lines in the window are at most this fraction of the predicted count. Default 0.2.'),
    /** A child span is marked slow when its duration is at least this many times its usual mean. Default 2. */
    slow_ratio: z
      .number()
      .min(1)
      .default(2)
      .describe('A child span is marked slow when its duration is at least this many times its usual mean. Default 2.'),
    /**
     * A usual call counts as missing only when spans like the parent make it at least this many
     * times per occurrence on average in the baseline (optional calls are not "missing"). Default 0.95.
     */
    missing_call_min_rate: z
      .number()
      .positive()
      .default(0.95)
      .describe(
        'A usual call counts as missing only when spans like the parent make it at least this many times per occurrence on average in the baseline (optional calls are not "missing"). Default 0.95.',
      ),
    /** Most characters of one observation's text; longer text is cut at a line and says so. Default 4000. */
    max_observation_chars: z
      .number()
      .int()
      .min(200)
      .default(4000)
      .describe("Most characters of one observation's text; longer text is cut at a line and says so. Default 4000."),
    /** Most items (children, metrics, log templates, answers) listed in one observation. Default 30. */
    max_items: z
      .number()
      .int()
      .min(1)
      .default(30)
      .describe('Most items (children, metrics, log templates, answers) listed in one observation. Default 30.'),
    /**
     * When true, span ids in observations are replaced by short per-episode aliases s1, s2, ...
     * and the tools accept them (small models cannot copy 16-hex ids). Default false.
     */
    span_aliases: z
      .boolean()
      .default(false)
      .describe(
        'When true, span ids in observations are replaced by short per-episode aliases s1, s2, ... and the tools accept them (small models cannot copy 16-hex ids). Default false.',
      ),
    /**
     * When true, pod names in observations and prompts are replaced by per-episode aliases that
     * keep the service and drop the deployment's hash suffix (ts-contacts-service-1 for the first
     * pod of ts-contacts-service seen), and the tools accept them: a pod the model names by its
     * alias (print_results, a component argument, ORACL's <root>) is its real pod for grading. A
     * redeploy renames every pod, and names that change between deployments are not vocabulary. Default false.
     */
    pod_aliases: z
      .boolean()
      .default(false)
      .describe(
        "When true, pod names in observations and prompts are replaced by per-episode aliases that keep the service and drop the deployment's hash suffix (ts-contacts-service-1 for the first pod of ts-contacts-service seen), and the tools accept them: a pod the model names by its alias (print_results, a component argument, ORACL's <root>) is its real pod for grading. A redeploy renames every pod, and names that change between deployments are not vocabulary. Default false.",
      ),
    /**
     * When true, search_traces states plainly what is abnormal about each child span, in one word
     * right after its span id (error, missing, slow, short for cut short, or usual), and lists the children
     * with children of their own first, most abnormal first, so that a small model reads the verdict instead of comparing durations
     * (ThinkFL's tools distil; notes/tiny-model.md). Default false.
     */
    verdicts: z
      .boolean()
      .default(false)
      .describe(
        "When true, search_traces states plainly what is abnormal about each child span, in one word right after its span id (error, missing, slow, short for cut short, or usual), and lists the children with children of their own first, most abnormal first, so that a small model reads the verdict instead of comparing durations (ThinkFL's tools distil the telemetry; this distils further for small models). Default false.",
      ),
    /** Timestamp forms the tools accept: Unix seconds/ms/µs/ns (told apart by magnitude) and ISO-8601. Default all. */
    timestamp_formats: z
      .array(z.enum(TIMESTAMP_FORMATS))
      .min(1)
      .default([...TIMESTAMP_FORMATS])
      .describe('Timestamp forms the tools accept: Unix seconds/ms/µs/ns (told apart by magnitude) and ISO-8601. Default all.'),
  })
  .refine((s) => s.baseline_window_s > s.metric_delta_s, {
    message: 'baseline_window_s must be larger than metric_delta_s',
    path: ['baseline_window_s'],
  });

export type ToolSettings = z.infer<typeof ToolSettingsSchema>;

/** Parses tool settings; errors name the offending key under `path` (e.g. "env.tools"). */
export function parseToolSettings(input: unknown, path = 'tools'): ToolSettings {
  const r = ToolSettingsSchema.safeParse(input ?? {});
  if (r.success) return r.data;
  throw new Error(`invalid tool settings: ${formatZodIssues(r.error, path)}`);
}
