/**
 * Latency: a slow span's excess over its usual duration that its children do not explain is
 * its own (self-time excess); on a client span, the gap over its server child belongs to the
 * call, so half of it goes to the callee. A slow span promises more the larger its excess.
 */
import { type Evidence, excessUs, isSlow, type KnownSpan, raisedError } from '../evidence';
import { blame, type EvidenceKind, type Finding, registerEvidenceKind, spanPositions, REASON_ORDER, type SuspectSettings } from './kind';

export const isClient = (k: KnownSpan): boolean => /^HTTP\b/i.test(k.summary.operation);

/** The largest excess among the known spans (at least 1 µs), the scale of every latency score. */
export function largestExcess(ev: Evidence): number {
  let m = 1;
  for (const k of ev.spans.values()) m = Math.max(m, excessUs(k.summary));
  return m;
}

/** The request's entry span: the parent of the first search_traces call. */
function entry(ev: Evidence): KnownSpan | undefined {
  for (const k of ev.spans.values()) if (k.depth === 0) return k;
  return undefined;
}

/**
 * Whether the request is slow and a slow span carries at least `share` of its excess: the
 * request's delay runs through the span, so the path below it leads to the cause, however deep.
 * (Under a request of usual duration, a slow call is noise of the kind that exceptions leave.)
 */
export function carriesRequest(ev: Evidence, k: KnownSpan, share: number, slowZ: number): boolean {
  const e = entry(ev);
  if (!e || !isSlow(e.summary, slowZ)) return false;
  return isSlow(k.summary, slowZ) && excessUs(k.summary) >= share * excessUs(e.summary);
}

/**
 * Whether the same call (same operation, same usual duration) was already opened next to this
 * one and its slowness was only a gap before a healthy server span: this one likely is too.
 */
export function echoesHealthyGap(ev: Evidence, k: KnownSpan, s: SuspectSettings): boolean {
  if (!isClient(k) || k.parentId === undefined) return false;
  return (ev.spans.get(k.parentId)?.children ?? []).some((id) => {
    const o = ev.spans.get(id);
    if (!o || o === k || !o.children?.length || o.summary.operation !== k.summary.operation) return false;
    if (o.summary.usual_mean_us !== k.summary.usual_mean_us) return false;
    const server = ev.spans.get(o.children[0])?.summary;
    return !!server && !isSlow(server, s.slowZ) && !raisedError(server);
  });
}

/** Who a span's unexplained latency belongs to: a client span's gap over its server child goes half to the callee. */
function latencyOwner(ev: Evidence, k: KnownSpan): { owner: KnownSpan; weight: number } {
  if (!isClient(k) || !k.children?.length) return { owner: k, weight: 1 };
  const callee = ev.spans.get(k.children[0]);
  return callee ? { owner: callee, weight: 0.5 } : { owner: k, weight: 1 };
}

/** A leaf that runs alongside a slow sibling with children only waits for it (a gateway's handler next to its outgoing call). */
function waitsForSibling(ev: Evidence, k: KnownSpan, s: SuspectSettings): boolean {
  if (k.summary.child_count > 0 || k.parentId === undefined) return false;
  const end = k.summary.start_us + k.summary.duration_us;
  return (ev.spans.get(k.parentId)?.children ?? []).some((id) => {
    const o = ev.spans.get(id)?.summary;
    return (
      !!o &&
      id !== k.summary.span_id &&
      o.child_count > 0 &&
      isSlow(o, s.slowZ) &&
      o.start_us < end &&
      k.summary.start_us < o.start_us + o.duration_us
    );
  });
}

export const latency: EvidenceKind = {
  name: 'latency',
  lead(ev, k, s) {
    return isSlow(k.summary, s.slowZ) ? 1 + excessUs(k.summary) / largestExcess(ev) : 0;
  },
  findings(ev, s) {
    const out: Finding[] = [];
    const maxEx = largestExcess(ev);
    const pos = spanPositions(ev);
    for (const k of ev.spans.values()) {
      const sum = k.summary;
      if (!isSlow(sum, s.slowZ)) continue;
      const kids = (k.children ?? []).map((id) => ev.spans.get(id)).filter((c): c is KnownSpan => !!c);
      const explained = kids.reduce((a, c) => a + Math.max(0, excessUs(c.summary)), 0);
      const own = excessUs(sum) - explained;
      if (own <= 0.2 * excessUs(sum) || waitsForSibling(ev, k, s)) continue;
      const { owner, weight } = latencyOwner(ev, k);
      const where =
        owner !== k
          ? `the call to it took ${(own / 1000).toFixed(1)} ms longer than its own span`
          : k.children !== undefined || sum.child_count === 0
            ? `its own time is ${(own / 1000).toFixed(1)} ms above usual`
            : `${sum.operation} is ${(own / 1000).toFixed(1)} ms slower than usual below it`;
      // Place 2 among the span's signs: after the error handler's two (errors.ts), as the expert always listed them.
      out.push(blame(owner, (weight * own) / maxEx, where, [REASON_ORDER.trace, pos.get(sum.span_id)!, 2]));
    }
    return out;
  },
};

registerEvidenceKind(latency);
