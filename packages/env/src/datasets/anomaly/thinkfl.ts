/**
 * ThinkFL's rule: the entry latency exceeds `thinkfl_factor` (100) times the normal mean of
 * its endpoint, or the request has a non-OK status (on its entry or any span below it, since
 * a callee's failure is often not propagated into the entry's status code).
 */
import { endpointOf, signature } from '../stores/baseline';
import { errorSpan, ms, type AnomalyRule } from './rule';

export const thinkfl: AnomalyRule = {
  name: 'thinkfl',
  judge(entry, { traces, baseline, settings }) {
    const failed = errorSpan(entry, traces);
    if (failed) return { reason: `span ${signature(failed)} has status ${failed.status_code ?? 'error'}`, score: settings.thinkfl_factor };
    const ep = endpointOf(traces, entry.trace_id);
    const usual = ep === undefined ? undefined : baseline.endpoint(ep);
    if (!usual || usual.count < settings.min_baseline_count || usual.meanUs <= 0) return undefined;
    const ratio = entry.duration_us / usual.meanUs;
    if (ratio <= settings.thinkfl_factor) return undefined;
    return { reason: `entry ${ms(entry.duration_us)} is ${ratio.toFixed(0)}x the normal ${ms(usual.meanUs)} of ${ep}`, score: ratio };
  },
};
