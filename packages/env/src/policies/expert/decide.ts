/**
 * The expert's one decision step: which span to open next, and which pods are most suspicious,
 * from what every kind of evidence (kinds/) found. Scores add up across kinds; the weights tuned
 * on data are settings chosen by leave-one-fault-out (scripts/expert-split.ts).
 */
import type { Evidence, KnownSpan } from './evidence';
import './kinds/builtin';
import { type EvidenceKind, evidenceKinds, type SuspectSettings } from './kinds/kind';
import { echoesHealthyGap } from './kinds/latency';

export interface Suspect {
  pod: string;
  service: string;
  score: number;
  /** Short phrases of evidence, strongest first. */
  reasons: string[];
}

/** Evidence carried by the span itself (not its subtree), summed over the kinds. */
function ownSignal(ev: Evidence, k: KnownSpan, s: SuspectSettings, kinds: readonly EvidenceKind[]): number {
  return kinds.reduce((v, kind) => v + (kind.lead?.(ev, k, s) ?? 0), 0);
}

/**
 * How much opening this span promises: its own signal, plus a share of its parent's when the
 * parent is suspicious (the cause lies among the parent's children), later calls first
 * (a request that failed stops after the failing call). 0 when nothing points into it.
 */
export function interest(ev: Evidence, k: KnownSpan, s: SuspectSettings, kinds: readonly EvidenceKind[] = evidenceKinds()): number {
  if (k.children !== undefined || k.summary.child_count === 0) return 0;
  const own = ownSignal(ev, k, s, kinds);
  const parent = k.parentId === undefined ? undefined : ev.spans.get(k.parentId);
  let inherited = 0;
  if (parent) {
    const p = ownSignal(ev, parent, s, kinds);
    if (p > 0) {
      const siblings = (parent.children ?? []).map((id) => ev.spans.get(id)!).filter((c) => c.summary.child_count > 0);
      const later = siblings.filter((c) => c.summary.start_us > k.summary.start_us).length;
      inherited = 0.5 * p * (1 - later / Math.max(siblings.length, 1));
    }
  }
  const v = (own + inherited) * (echoesHealthyGap(ev, k, s) ? 0.5 : 1);
  return v > 0 ? v + 0.01 * k.depth : 0;
}

/** Pods ranked by the sum of what every kind found, reasons in REASON_ORDER. */
export function rankSuspects(ev: Evidence, s: SuspectSettings, kinds: readonly EvidenceKind[] = evidenceKinds()): Suspect[] {
  const found: (ReturnType<EvidenceKind['findings']>[number] & { seq: number })[] = [];
  const blamed = new Map<string, string>();
  for (const kind of kinds) {
    for (const f of kind.findings(ev, s, blamed)) {
      found.push({ ...f, seq: found.length });
      if (!blamed.has(f.pod)) blamed.set(f.pod, f.service);
    }
  }
  const byPod = new Map<string, Suspect>();
  for (const f of found) {
    const cur = byPod.get(f.pod) ?? { pod: f.pod, service: blamed.get(f.pod)!, score: 0, reasons: [] };
    cur.score += f.score;
    byPod.set(f.pod, cur);
  }
  const ordered = [...found].sort((a, b) => a.order[0] - b.order[0] || a.order[1] - b.order[1] || a.order[2] - b.order[2] || a.seq - b.seq);
  for (const f of ordered) {
    const reasons = byPod.get(f.pod)!.reasons;
    if (!reasons.includes(f.reason)) reasons.push(f.reason);
  }
  return [...byPod.values()].sort((a, b) => b.score - a.score || a.pod.localeCompare(b.pod));
}
