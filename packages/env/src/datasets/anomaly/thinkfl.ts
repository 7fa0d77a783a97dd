/**
 * ThinkFL's rule: the entry latency exceeds `thinkflFactor` (100) times the normal mean of
 * its endpoint, or the entry span has a non-OK status.
 */
import { endpointOf } from '../stores/baseline';
import { ms, type AnomalyRule } from './rule';

export const thinkfl: AnomalyRule = {
  name: 'thinkfl',
  judge(entry, { traces, baseline, settings }) {
    if (entry.status === 'error') {
      return { reason: `entry status ${entry.statusCode ?? 'error'}`, score: settings.thinkflFactor };
    }
    const ep = endpointOf(traces, entry.traceId);
    const usual = ep === undefined ? undefined : baseline.endpoint(ep);
    if (!usual || usual.count < settings.minBaselineCount || usual.meanUs <= 0) return undefined;
    const ratio = entry.durationUs / usual.meanUs;
    if (ratio <= settings.thinkflFactor) return undefined;
    return { reason: `entry ${ms(entry.durationUs)} is ${ratio.toFixed(0)}x the normal ${ms(usual.meanUs)} of ${ep}`, score: ratio };
  },
};
