/**
 * Errors: an exception shows in the trace as an error handler that ran (blamed on the deepest
 * service whose handler ran, and on the callee that threw), as a call pattern cut short (usual
 * calls not made, a call much faster than usual), and in the logs as error templates never seen
 * in the fault-free baseline or far above their usual rate.
 */
import { type Evidence, isFast, isSlow, type KnownSpan, otherChanges, raisedError, serviceOfSignature } from '../evidence';
import { blame, type EvidenceKind, type Finding, registerEvidenceKind, REASON_ORDER, spanPositions, type SuspectSettings } from './kind';
import { isClient } from './latency';

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
  return out.sort((a, b) => a.summary.start_us - b.summary.start_us);
}

/** Whether a known descendant in another service ran an error handler or is slow: the trouble came from below. */
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

function traceFindings(ev: Evidence, s: SuspectSettings): Finding[] {
  const out: Finding[] = [];
  const pos = spanPositions(ev);
  for (const k of ev.spans.values()) {
    const sum = k.summary;
    const at = (place: number): Finding['order'] => [REASON_ORDER.trace, pos.get(sum.span_id)!, place];
    if (raisedError(sum)) {
      const passedOn = troubleBelow(ev, k, s);
      out.push(
        blame(
          k,
          (passedOn ? 0.4 : 1) + 0.1 * k.depth,
          `its error handler ran below ${sum.operation}${passedOn ? ' after a failing call' : ''}`,
          at(0),
        ),
      );
      // The handler caught what its last call threw: the callee answered with the exception.
      const last = callees(ev, k)
        .filter((c) => c.summary.service !== sum.service)
        .at(-1);
      if (last && !passedOn)
        out.push(blame(last, s.callerErrorWeight, `${sum.service} ran its error handler right after calling it`, at(1)));
    }
    const other = otherChanges(sum);
    if (other.missing.length) {
      const called = callees(ev, k);
      out.push(blame(k, 0.3, `usual calls below ${sum.operation} were not made (${other.missing.slice(0, 2).join(', ')})`, at(3)));
      if (called.length) out.push(blame(called[called.length - 1], 0.6, `last call made before ${sum.service} stopped calling`, at(4)));
    }
    for (const a of other.added) {
      const target = callees(ev, k).find((c) => c.summary.service === serviceOfSignature(a));
      out.push(blame(target ?? k, 0.1, `an unusual call appeared (${a})`, at(5)));
    }
    if (isFast(sum, s.fastRatio) && k.children === undefined)
      out.push(blame(k, 0.3, `much faster than usual (x${(sum.ratio ?? 0).toFixed(2)}), as if cut short`, at(6)));
  }
  return out;
}

/** Error log templates of every log check (a node's check names each pod it came from). */
function logFindings(ev: Evidence, s: SuspectSettings): Finding[] {
  const podLogs = new Map<string, { service: string; fresh: number; risen: number }>();
  for (const l of ev.logs.values()) {
    for (const t of l.templates) {
      if (t.level !== 'error') continue;
      const fresh = t.unseen_in_baseline;
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
  const out: Finding[] = [];
  for (const [pod, e] of podLogs) {
    // An error never logged in the fault-free baseline is the strongest sign of an exception or a bad result there.
    if (e.fresh)
      out.push({
        pod,
        service: e.service,
        score: 1.5,
        reason: `${e.fresh} error log template(s) never seen in the fault-free baseline`,
        order: [REASON_ORDER.freshLog, 0, 0],
      });
    if (e.risen) {
      out.push({
        pod,
        service: e.service,
        score: s.risenLogWeight,
        reason: `error logs ${e.risen > 1 ? 'of several templates ' : ''}above their usual rate`,
        order: [REASON_ORDER.risenLog, 0, 0],
      });
    }
  }
  return out;
}

/** A span that promises what an exception leaves: a handler that ran, usual calls not made, a call cut short under a caller that is not slow. */
function lead(ev: Evidence, k: KnownSpan, s: SuspectSettings): number {
  const sum = k.summary;
  const other = otherChanges(sum);
  let v = 0;
  if (raisedError(sum)) v += 3;
  if (other.missing.length) v += 1.5;
  if (other.added.length) v += 0.3;
  if (isFast(sum, s.fastRatio)) {
    const parent = k.parentId === undefined ? undefined : ev.spans.get(k.parentId);
    v += s.fastLeadWeight + (parent && !isSlow(parent.summary, s.slowZ) ? s.calmFastLeadBonus : 0);
  }
  return v;
}

export const errors: EvidenceKind = {
  name: 'errors',
  lead,
  findings: (ev, s) => [...traceFindings(ev, s), ...logFindings(ev, s)],
};

registerEvidenceKind(errors);
