/**
 * Kinds of evidence the expert weighs (latency, errors, silence, resources), each one module
 * that registers itself here. A kind reads the evidence gathered so far and says which pods it
 * blames, and how much a span's own signs make it worth opening; decide.ts weighs them all.
 */
import type { Evidence, KnownSpan } from '../evidence';

/** The tuned weights and thresholds the kinds read (the expert's settings, camelCased). */
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

/**
 * Where a finding's reason goes among a suspect's reasons: silent statements, then never-seen
 * error templates (the strongest signs), then the trace's signs in span order, then metrics,
 * then risen error rates.
 */
export const REASON_ORDER = { silent: 0, freshLog: 1, trace: 2, metrics: 3, risenLog: 4 } as const;

export interface Finding {
  pod: string;
  service: string;
  score: number;
  reason: string;
  /** [REASON_ORDER class, span position, place within the span's signs]: sorts the reasons. */
  order: [number, number, number];
}

export interface EvidenceKind {
  name: string;
  /** Scores only pods that other kinds blamed; weighed after every kind that blames. */
  confirms?: boolean;
  /** How much a span's own signs of this kind promise when opened (0 when none). */
  lead?(ev: Evidence, k: KnownSpan, s: SuspectSettings): number;
  /**
   * Pods this kind blames. `suspects` are the pods the kinds before it blamed (pod -> service):
   * a kind that only confirms (resources) scores those and no other.
   */
  findings(ev: Evidence, s: SuspectSettings, suspects: ReadonlyMap<string, string>): Finding[];
}

const kinds: EvidenceKind[] = [];

export function registerEvidenceKind(kind: EvidenceKind): void {
  if (kinds.some((k) => k.name === kind.name)) throw new Error(`evidence kind ${kind.name} registered twice`);
  kinds.push(kind);
}

/** The registered kinds in the order they are weighed: registration order, confirming kinds last. */
export function evidenceKinds(): readonly EvidenceKind[] {
  return [...kinds.filter((k) => !k.confirms), ...kinds.filter((k) => k.confirms)];
}

/** Position of every known span in the evidence's order (findings of all kinds sort by it). */
export function spanPositions(ev: Evidence): Map<string, number> {
  return new Map([...ev.spans.keys()].map((id, i) => [id, i]));
}

/** A finding that blames the span's own pod. */
export function blame(k: KnownSpan, score: number, reason: string, order: Finding['order']): Finding {
  return { pod: k.summary.pod, service: k.summary.service, score, reason, order };
}
