/**
 * The expert's turn plan: which log and metric checks to make, and how many of the turns left
 * to keep for them rather than for opening spans. In a slow request, a descent along a path
 * that carries the request's delay gets every turn it needs: a deep callee (route, 8 spans
 * down) is reachable within D_max only when no check interrupts the descent.
 */
import type { Evidence, KnownSpan } from './evidence';
import type { Suspect } from './decide';
import { carriesRequest } from './kinds/latency';

export type Check = { tool: 'search_fluctuating_metrics' | 'search_logs'; target: string; suspect?: Suspect };

export interface PlanSettings {
  /** Node log checks (every pod of a node at once) of the nodes seen, before per-suspect checks. */
  logSurvey: number;
  /** Top suspects whose logs are checked when no surveyed node covers them. */
  logChecks: number;
  /** Turns kept for checks when no strong lead is open. */
  confirmations: number;
  /** Turns kept for checks while a strong lead is open. */
  leadChecks: number;
  /** Interest from which a lead counts as strong. */
  strongLead: number;
  /** A slow lead carrying at least this share of the request's excess keeps no turn for checks; null: none does. */
  slowPathShare: number | null;
  slowZ: number;
}

/** Nodes of the spans seen, most spans first (then deepest), for the log survey. */
function surveyNodes(ev: Evidence): string[] {
  const count = new Map<string, number>();
  const depth = new Map<string, number>();
  for (const k of ev.spans.values()) {
    const n = k.summary.node;
    if (!n) continue;
    count.set(n, (count.get(n) ?? 0) + 1);
    depth.set(n, Math.max(depth.get(n) ?? 0, k.depth));
  }
  return [...count.keys()].sort((a, b) => count.get(b)! - count.get(a)! || depth.get(b)! - depth.get(a)! || a.localeCompare(b));
}

/**
 * Logs of the nodes the trace ran on (exceptions and wrong results show there, for every pod of
 * a node at once), then of top suspects on no surveyed node, then the leader's metrics; only
 * checks not made yet, with tools offered.
 */
export function checks(suspects: Suspect[], ev: Evidence, offered: Set<string>, s: PlanSettings): Check[] {
  const nodes = surveyNodes(ev).slice(0, s.logSurvey);
  const covered = (sus: Suspect) =>
    [...ev.spans.values()].some((k) => k.summary.pod === sus.pod && k.summary.node !== undefined && nodes.includes(k.summary.node));
  const plan: Check[] = nodes.map((n) => ({ tool: 'search_logs', target: n }));
  for (const sus of suspects.slice(0, s.logChecks))
    if (!covered(sus)) plan.push({ tool: 'search_logs', target: sus.service, suspect: sus });
  if (suspects[0]) plan.push({ tool: 'search_fluctuating_metrics', target: suspects[0].pod, suspect: suspects[0] });
  return plan.filter((c) => offered.has(c.tool) && !(c.tool === 'search_logs' ? ev.logs.has(c.target) : ev.metrics.has(c.target)));
}

/** Turns to keep for the `pending` checks given the lead to open next (none: all of them). */
export function turnsForChecks(
  ev: Evidence,
  lead: { span: KnownSpan; value: number } | undefined,
  pending: number,
  s: PlanSettings,
): number {
  if (lead && s.slowPathShare !== null && carriesRequest(ev, lead.span, s.slowPathShare, s.slowZ)) return 0;
  return Math.min(lead && lead.value >= s.strongLead ? s.leadChecks : s.confirmations, pending);
}
