/**
 * Silence: a log statement the service writes on every call stopped around the request (the
 * search_logs silent list). An exception skips the lines after the throw, and a wrong result
 * often skips a branch, while latency and error logs may show nothing.
 */
import { type EvidenceKind, type Finding, registerEvidenceKind, REASON_ORDER } from './kind';

export const silence: EvidenceKind = {
  name: 'silence',
  findings(ev, s) {
    // Without weight the silent statements leave the ranking as it was (the tiny teacher's setting).
    if (s.silentLogWeight <= 0) return [];
    const byPod = new Map<string, { service: string; n: number }>();
    for (const l of ev.logs.values()) {
      for (const st of l.silent) for (const pod of st.pods) byPod.set(pod, { service: st.service, n: (byPod.get(pod)?.n ?? 0) + 1 });
    }
    return [...byPod].map(
      ([pod, e]): Finding => ({
        pod,
        service: e.service,
        score: s.silentLogWeight,
        reason: `${e.n} log statement(s) it usually writes went silent`,
        order: [REASON_ORDER.silent, 0, 0],
      }),
    );
  },
};

registerEvidenceKind(silence);
