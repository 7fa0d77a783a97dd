/**
 * The expert's judgement: which span to open next, and which pods are most suspicious given
 * the evidence. An exception is blamed on the deepest service whose error handler ran (the
 * callers' handlers only pass it on); latency where it stops being explained by children;
 * a call pattern cut short on the last callee before the cut. Metrics and logs add weight
 * to suspects they confirm.
 */
import {
  type Evidence,
  excessUs,
  isFast,
  isSlow,
  type KnownSpan,
  otherChanges,
  raisedError,
  serviceOfSignature,
} from './evidence';

export interface SuspectSettings {
  /** z above which a span counts as slow (besides the tool's own slow mark). */
  slowZ: number;
  /** Ratio to usual at or below which a span counts as cut short. */
  fastRatio: number;
  /** A log template counts when new or at least this many times its usual rate. */
  logRatio: number;
  /** Score of the last callee of a span whose error handler ran. */
  callerErrorWeight: number;
  /** Score of error log templates above their usual rate (not new). */
  risenLogWeight: number;
  /** Score of a pod whose usual log statements went silent. */
  silentLogWeight: number;
  /** Interest of a span cut short (ratio at or below fastRatio) when choosing what to open. */
  fastLeadWeight: number;
  /** Added to that interest when the span's caller is not slow: the request ended early rather than late. */
  calmFastLeadBonus: number;
}

export interface Suspect {
  pod: string;
  service: string;
  score: number;
  /** Short phrases of evidence, strongest first. */
  reasons: string[];
}

const isClient = (k: KnownSpan): boolean => /^HTTP\b/i.test(k.summary.operation);

function largestExcess(ev: Evidence): number {
  let m = 1;
  for (const k of ev.spans.values()) m = Math.max(m, excessUs(k.summary));
  return m;
}

/** Evidence carried by the span itself (not its subtree), for choosing what to open. */
function ownSignal(ev: Evidence, k: KnownSpan, s: SuspectSettings): number {
  const sum = k.summary;
  const other = otherChanges(sum);
  let v = 0;
  if (raisedError(sum)) v += 3;
  if (other.missing.length) v += 1.5;
  if (other.added.length) v += 0.3;
  if (isSlow(sum, s.slowZ)) v += 1 + excessUs(sum) / largestExcess(ev);
  if (isFast(sum, s.fastRatio)) {
    const parent = k.parentId === undefined ? undefined : ev.spans.get(k.parentId);
    v += s.fastLeadWeight + (parent && !isSlow(parent.summary, s.slowZ) ? s.calmFastLeadBonus : 0);
  }
  return v;
}

/**
 * Whether the same call (same operation, same usual duration) was already opened next to this
 * one and its slowness was only a gap before a healthy server span: this one likely is too.
 */
function gapSibling(ev: Evidence, k: KnownSpan, s: SuspectSettings): boolean {
  if (!isClient(k) || k.parentId === undefined) return false;
  return (ev.spans.get(k.parentId)?.children ?? []).some((id) => {
    const o = ev.spans.get(id);
    if (!o || o === k || !o.children?.length || o.summary.operation !== k.summary.operation) return false;
    if (o.summary.usualMeanUs !== k.summary.usualMeanUs) return false;
    const server = ev.spans.get(o.children[0])?.summary;
    return !!server && !isSlow(server, s.slowZ) && !raisedError(server);
  });
}

/**
 * How much opening this span promises: its own signal, plus a share of its parent's when the
 * parent is suspicious (the cause lies among the parent's children), later calls first
 * (a request that failed stops after the failing call). 0 when nothing points into it.
 */
export function interest(ev: Evidence, k: KnownSpan, s: SuspectSettings): number {
  if (k.children !== undefined || k.summary.childCount === 0) return 0;
  const own = ownSignal(ev, k, s);
  const parent = k.parentId === undefined ? undefined : ev.spans.get(k.parentId);
  let inherited = 0;
  if (parent) {
    const p = ownSignal(ev, parent, s);
    if (p > 0) {
      const siblings = (parent.children ?? []).map((id) => ev.spans.get(id)!).filter((c) => c.summary.childCount > 0);
      const later = siblings.filter((c) => c.summary.startUs > k.summary.startUs).length;
      inherited = 0.5 * p * (1 - later / Math.max(siblings.length, 1));
    }
  }
  const v = (own + inherited) * (gapSibling(ev, k, s) ? 0.5 : 1);
  return v > 0 ? v + 0.01 * k.depth : 0;
}

/** Children of an opened span that run in another service, i.e. the calls it made, by start. */
function callees(ev: Evidence, k: KnownSpan): KnownSpan[] {
  const out: KnownSpan[] = [];
  for (const id of k.children ?? []) {
    const c = ev.spans.get(id);
    if (!c) continue;
    if (c.summary.service !== k.summary.service) out.push(c);
    else if (isClient(c)) {
      const server = (c.children ?? []).map((g) => ev.spans.get(g)).find((g) => g && g.summary.service !== k.summary.service);
      out.push(server ?? c);
    }
  }
  return out.sort((a, b) => a.summary.startUs - b.summary.startUs);
}

/**
 * Who a span's unexplained latency belongs to, and how surely: a client span's gap over its
 * server child belongs to the call (callee, caller or network: half weight to the callee).
 */
function latencyOwner(ev: Evidence, k: KnownSpan): { owner: KnownSpan; weight: number } {
  if (!isClient(k) || !k.children?.length) return { owner: k, weight: 1 };
  const callee = ev.spans.get(k.children[0]);
  return callee ? { owner: callee, weight: 0.5 } : { owner: k, weight: 1 };
}

/** A leaf that runs alongside a slow sibling with children only waits for it (a gateway's handler next to its outgoing call). */
function waitsForSibling(ev: Evidence, k: KnownSpan, s: SuspectSettings): boolean {
  if (k.summary.childCount > 0 || k.parentId === undefined) return false;
  const end = k.summary.startUs + k.summary.durationUs;
  return (ev.spans.get(k.parentId)?.children ?? []).some((id) => {
    const o = ev.spans.get(id)?.summary;
    return !!o && id !== k.summary.spanId && o.childCount > 0 && isSlow(o, s.slowZ) && o.startUs < end && k.summary.startUs < o.startUs + o.durationUs;
  });
}

/** Whether a known descendant of the span ran an error handler or is slow: the trouble came from below. */
function troubleBelow(ev: Evidence, k: KnownSpan, s: SuspectSettings): boolean {
  const stack = [...(k.children ?? [])];
  while (stack.length) {
    const c = ev.spans.get(stack.pop()!);
    if (!c) continue;
    if (c.summary.service !== k.summary.service && (raisedError(c.summary) || isSlow(c.summary, s.slowZ))) return true;
    stack.push(...(c.children ?? []));
  }
  return false;
}

export function rankSuspects(ev: Evidence, s: SuspectSettings): Suspect[] {
  const byPod = new Map<string, Suspect>();
  const add = (k: KnownSpan, score: number, reason: string): void => {
    const { pod, service } = k.summary;
    const cur = byPod.get(pod) ?? { pod, service, score: 0, reasons: [] };
    cur.score += score;
    if (!cur.reasons.includes(reason)) cur.reasons.push(reason);
    byPod.set(pod, cur);
  };
  const maxEx = largestExcess(ev);
  for (const k of ev.spans.values()) {
    const sum = k.summary;
    if (raisedError(sum)) {
      const passedOn = troubleBelow(ev, k, s);
      add(k, (passedOn ? 0.4 : 1) + 0.1 * k.depth, `its error handler ran below ${sum.operation}${passedOn ? ' after a failing call' : ''}`);
      // The handler caught what its last call threw: the callee answered with the exception.
      const last = callees(ev, k).filter((c) => c.summary.service !== sum.service).at(-1);
      if (last && !passedOn) add(last, s.callerErrorWeight, `${sum.service} ran its error handler right after calling it`);
    }
    if (isSlow(sum, s.slowZ)) {
      const kids = (k.children ?? []).map((id) => ev.spans.get(id)).filter((c): c is KnownSpan => !!c);
      const explained = kids.reduce((a, c) => a + Math.max(0, excessUs(c.summary)), 0);
      const own = excessUs(sum) - explained;
      if (own > 0.2 * excessUs(sum) && !waitsForSibling(ev, k, s)) {
        const { owner, weight } = latencyOwner(ev, k);
        const where =
          owner !== k ? `the call to it took ${(own / 1000).toFixed(1)} ms longer than its own span`
          : k.children !== undefined || sum.childCount === 0 ? `its own time is ${(own / 1000).toFixed(1)} ms above usual`
          : `${sum.operation} is ${(own / 1000).toFixed(1)} ms slower than usual below it`;
        add(owner, (weight * own) / maxEx, where);
      }
    }
    const other = otherChanges(sum);
    if (other.missing.length) {
      const called = callees(ev, k);
      add(k, 0.3, `usual calls below ${sum.operation} were not made (${other.missing.slice(0, 2).join(', ')})`);
      if (called.length) add(called[called.length - 1], 0.6, `last call made before ${sum.service} stopped calling`);
    }
    for (const a of other.added) {
      const target = callees(ev, k).find((c) => c.summary.service === serviceOfSignature(a));
      add(target ?? k, 0.1, `an unusual call appeared (${a})`);
    }
    if (isFast(sum, s.fastRatio) && k.children === undefined) add(k, 0.3, `much faster than usual (x${(sum.ratio ?? 0).toFixed(2)}), as if cut short`);
  }
  // Error log templates of every log check (a node's check names each pod it came from).
  const podLogs = new Map<string, { service: string; fresh: number; risen: number }>();
  for (const l of ev.logs.values()) {
    for (const t of l.templates) {
      if (t.level !== 'error') continue;
      const fresh = t.unseenInBaseline;
      const risen = !fresh && (t.ratio ?? 0) >= s.logRatio;
      if (!fresh && !risen) continue;
      t.pods.forEach((pod, i) => {
        const e = podLogs.get(pod) ?? { service: t.services[Math.min(i, t.services.length - 1)] ?? pod, fresh: 0, risen: 0 };
        if (fresh) e.fresh++;
        else e.risen++;
        podLogs.set(pod, e);
      });
    }
  }
  const silentBy = new Map<string, { service: string; n: number }>();
  for (const l of ev.logs.values()) {
    for (const st of l.silent) {
      for (const pod of st.pods) silentBy.set(pod, { service: st.service, n: (silentBy.get(pod)?.n ?? 0) + 1 });
    }
  }
  // Without weight the silent statements leave the ranking as it was (the tiny teacher's setting).
  if (s.silentLogWeight > 0) for (const [pod, e] of silentBy) if (!podLogs.has(pod)) podLogs.set(pod, { service: e.service, fresh: 0, risen: 0 });
  // A pod off the opened path counts as much: the request may not have been followed down to it.
  for (const [pod, e] of podLogs) if (!byPod.has(pod)) byPod.set(pod, { pod, service: e.service, score: 0, reasons: [] });
  for (const sus of byPod.values()) {
    const metrics = [ev.metrics.get(sus.pod), ev.metrics.get(sus.service)].flatMap((m) => m?.fluctuating ?? []);
    const own = metrics.filter((f) => f.component === sus.pod || f.component === sus.service);
    if (own.length) {
      sus.score += Math.min(0.6, 0.15 * own.length);
      sus.reasons.push(`metrics off their usual band: ${own.slice(0, 3).map((f) => f.metric).join(', ')}`);
    }
    const logs = podLogs.get(sus.pod);
    // An error never logged in the fault-free baseline is the strongest sign of an exception or a bad result there.
    if (logs?.fresh) {
      sus.score += 1.5;
      sus.reasons.unshift(`${logs.fresh} error log template(s) never seen in the fault-free baseline`);
    }
    const silent = silentBy.get(sus.pod);
    // A statement the service always logs stopped: an exception skipped it, or calls stopped reaching it.
    if (silent && s.silentLogWeight > 0) {
      sus.score += s.silentLogWeight;
      sus.reasons.unshift(`${silent.n} log statement(s) it usually writes went silent`);
    }
    if (logs?.risen) {
      sus.score += s.risenLogWeight;
      sus.reasons.push(`error logs ${logs.risen > 1 ? 'of several templates ' : ''}above their usual rate`);
    }
  }
  return [...byPod.values()].sort((a, b) => b.score - a.score || a.pod.localeCompare(b.pod));
}
