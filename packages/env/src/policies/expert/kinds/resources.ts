/**
 * Resources: metrics of a suspect (CPU, memory, I/O, its latency percentiles) that left their
 * usual band around the request. They only confirm: alone they blame too many pods (a busy
 * node moves every pod's series), so this kind scores only pods the other kinds blamed.
 */
import { type EvidenceKind, type Finding, registerEvidenceKind, REASON_ORDER } from './kind';

/** Most a suspect gains from its metrics, and the gain per series off its band. */
const MAX_GAIN = 0.6;
const PER_SERIES = 0.15;

export const resources: EvidenceKind = {
  name: 'resources',
  confirms: true,
  findings(ev, _s, suspects) {
    const out: Finding[] = [];
    for (const [pod, service] of suspects) {
      const own = [ev.metrics.get(pod), ev.metrics.get(service)]
        .flatMap((m) => m?.fluctuating ?? [])
        .filter((f) => f.component === pod || f.component === service);
      if (!own.length) continue;
      out.push({
        pod,
        service,
        score: Math.min(MAX_GAIN, PER_SERIES * own.length),
        reason: `metrics off their usual band: ${own
          .slice(0, 3)
          .map((f) => f.metric)
          .join(', ')}`,
        order: [REASON_ORDER.metrics, 0, 0],
      });
    }
    return out;
  },
};

registerEvidenceKind(resources);
