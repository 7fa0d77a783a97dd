/**
 * `rclagent-script`: a scripted stand-in for RCLAgent's LLM roles on the `rclagent` protocol,
 * reported as "rclagent-scripted" (../shared/notes/seed-systems.md 1.4c). It runs Algorithm 1 as a
 * depth-first search over the spans its own search_traces calls returned, children by excess
 * latency. A span is "deemed" a potential root cause when it is slow, errored or cut off from its
 * usual calls and no child explains more than `explain_share` of its excess; a deemed span is not
 * expanded. Phase 1 answers the deemed pods (R0); phase 2 resumes below R0, then asks the metric
 * agent (the intermodal step: K = the pod, its service's series and its node) and keeps the
 * candidates with a series beyond the band (R1, by peak sigma, the earliest break first on ties);
 * phase 3 answers R1 then R0. Where no candidate is confirmed, R1 keeps the trace candidates
 * (print_results needs one item; the paper would discard them all). It reads only its
 * observations, never the truth.
 */
import { z } from 'zod';
import type { SearchMetricsData } from '../tools';
import type { AssistantMessage, Policy, PolicyContext, RootCause } from '../types';
import { type Evidence, excessUs, gatherEvidence, isSlow, type KnownSpan, otherChanges, raisedError } from './expert/evidence';
import { hermes } from './expert/messages';
import { registerPolicy } from './registry';

export const RclAgentScriptSettingsSchema = z.object({
  /** Spans opened in phase 1 before answering R0 (the protocol's initial_turns less the answer). Default 3. */
  phase1_opens: z.number().int().min(0).default(3),
  /** Spans opened below R0 in phase 2 before the metric checks. Default 2. */
  phase2_opens: z.number().int().min(0).default(2),
  /** Candidates whose metrics are checked in phase 2. Default 3. */
  metric_checks: z.number().int().min(1).default(3),
  /** A span is deemed when no child explains more than this share of its excess. Default 0.5 (the note's "half"). */
  explain_share: z.number().gt(0).lt(1).default(0.5),
  /** Besides the tool's SLOW mark, a span is slow this many usual standard deviations above its usual duration. Default 3. */
  slow_z: z.number().positive().default(3),
  /** Most root causes in an answer. Default 5. */
  max_answers: z.number().int().min(1).default(5),
});
export type RclAgentScriptSettings = z.infer<typeof RclAgentScriptSettingsSchema>;

const abnormal = (k: KnownSpan, s: RclAgentScriptSettings): boolean =>
  isSlow(k.summary, s.slow_z) || raisedError(k.summary) || otherChanges(k.summary).missing.length > 0;

/** Children of an opened span worth following: abnormal, or carrying a share of its excess; largest excess first (the DFS order). */
function suspiciousChildren(ev: Evidence, k: KnownSpan, s: RclAgentScriptSettings): KnownSpan[] {
  const own = excessUs(k.summary);
  return (k.children ?? [])
    .map((id) => ev.spans.get(id)!)
    .filter((c) => abnormal(c, s) || (own > 0 && excessUs(c.summary) > s.explain_share * own))
    .sort((a, b) => excessUs(b.summary) - excessUs(a.summary) || b.summary.start_us - a.summary.start_us);
}

/** A leaf running alongside a sibling that has children only waits for it (a gateway's handler beside its outgoing call). */
function waitsForSibling(ev: Evidence, k: KnownSpan): boolean {
  if (k.parentId === undefined) return false;
  const end = k.summary.start_us + k.summary.duration_us;
  return (ev.spans.get(k.parentId)?.children ?? []).some((id) => {
    const o = ev.spans.get(id)?.summary;
    return !!o && id !== k.summary.span_id && o.child_count > 0 && o.start_us < end && k.summary.start_us < o.start_us + o.duration_us;
  });
}

/** Deemed: abnormal, and no child explains more than explain_share of its excess. */
function deemed(ev: Evidence, k: KnownSpan, s: RclAgentScriptSettings): boolean {
  if (!abnormal(k, s)) return false;
  if (k.summary.child_count === 0) return !waitsForSibling(ev, k);
  if (k.children === undefined) return false;
  const own = excessUs(k.summary);
  const kids = suspiciousChildren(ev, k, s);
  if (raisedError(k.summary) && !kids.some((c) => raisedError(c.summary))) return true;
  const all = (k.children ?? []).map((id) => ev.spans.get(id)!);
  return own > 0 && kids.every((c) => !abnormal(c, s)) && all.every((c) => excessUs(c.summary) <= s.explain_share * own);
}

/** Algorithm 1's DFS from the entry: the next span to open, and the spans deemed so far (in DFS order). */
function search(
  ev: Evidence,
  root: KnownSpan | undefined,
  s: RclAgentScriptSettings,
  below?: Set<string>,
): { open?: KnownSpan; found: KnownSpan[] } {
  const found: KnownSpan[] = [];
  let open: KnownSpan | undefined;
  const visit = (k: KnownSpan, expandDeemed: boolean): void => {
    if (k.children === undefined) {
      if (k.summary.child_count > 0 && !open) open = k;
      else if (deemed(ev, k, s)) found.push(k);
      return;
    }
    // The entry span is the symptom the case was chosen for: never a candidate by itself.
    if (k !== root && deemed(ev, k, s)) {
      found.push(k);
      if (!expandDeemed) return;
    }
    const next = suspiciousChildren(ev, k, s);
    // Nothing abnormal below: follow the call path where the most excess went (a dead end otherwise).
    const onward = (k.children ?? []).map((id) => ev.spans.get(id)!).filter((c) => c.summary.child_count > 0);
    if (!next.length && onward.length) next.push(onward.sort((a, b) => excessUs(b.summary) - excessUs(a.summary))[0]);
    for (const c of next) visit(c, expandDeemed);
  };
  if (!root) return { found };
  if (below) {
    // Phase 2 resumes below R0: each R0 span is expanded even though it was deemed.
    for (const k of ev.spans.values()) if (below.has(k.summary.span_id)) visit(k, true);
  } else visit(root, false);
  return { open, found };
}

function dedupPods(spans: KnownSpan[]): RootCause[] {
  const out: RootCause[] = [];
  for (const k of [...spans].sort((a, b) => excessUs(b.summary) - excessUs(a.summary))) {
    if (!out.some((r) => r.pod === k.summary.pod)) out.push({ service: k.summary.service, pod: k.summary.pod });
  }
  return out;
}

function lastAnswer(ctx: PolicyContext, nth: number): RootCause[] | undefined {
  const answers = ctx.toolCalls.filter((c) => c.name === 'print_results' && c.observation.ok);
  return (answers[nth]?.observation.data as { answer: RootCause[] } | undefined)?.answer;
}

/** The candidates whose pod has a metric beyond its band (the metric agent's answer), largest deviation first, then earliest peak. */
function confirmedByMetrics(candidates: RootCause[], ev: Evidence): RootCause[] {
  return candidates
    .map((c) => ({ c, m: ev.metrics.get(c.pod!) as SearchMetricsData | undefined }))
    .filter((x) => (x.m?.fluctuating.length ?? 0) > 0)
    .map((x) => {
      const peak = x.m!.fluctuating.reduce((a, f) => (Math.abs(f.max_deviation_sigma) > Math.abs(a.max_deviation_sigma) ? f : a));
      const first = Math.min(...x.m!.fluctuating.map((f) => f.peak_ts));
      return { ...x, sigma: Math.abs(peak.max_deviation_sigma), first };
    })
    .sort((a, b) => b.sigma - a.sigma || a.first - b.first)
    .map((x) => x.c);
}

export function createRclAgentScript(settings: RclAgentScriptSettings): Policy {
  return {
    name: 'rclagent-script',
    async next(ctx: PolicyContext): Promise<AssistantMessage> {
      const s = settings;
      const ev = gatherEvidence(ctx.toolCalls.filter((c) => c.name !== 'print_results'));
      const offered = new Set(ctx.tools.map((t) => t.name));
      const root = [...ev.spans.values()].find((k) => k.depth === 0 && k.parentId === undefined);
      const r0 = lastAnswer(ctx, 0);
      const ts = Math.round(ctx.case.timestamp_us / 1e6);
      const print = (answer: RootCause[], why: string): AssistantMessage =>
        hermes(why, 'print_results', {
          root_causes: answer.length ? answer.slice(0, s.max_answers) : [{ pod: root?.summary.pod ?? 'unknown' }],
        });

      if (ctx.final) {
        const r1 = lastAnswer(ctx, 1);
        const union: RootCause[] = [];
        for (const r of [...(r1 ?? []), ...(r0 ?? [])]) if (!union.some((u) => u.pod === r.pod)) union.push(r);
        return print(union, 'Final review: the confirmed candidates of the reflection first, then those of the first reasoning.');
      }
      if (!ev.calls.get('search_traces')) {
        const entry = ctx.messages.map((m) => (m.role === 'user' ? /Entry span: (\S+)/.exec(m.content)?.[1] : undefined)).find(Boolean);
        return hermes('I start from the entry span of the request.', 'search_traces', { parent_span_id: entry ?? ctx.case.entry_span_id });
      }
      const phase1 = !offered.has('search_fluctuating_metrics');
      if (phase1) {
        const { open, found } = search(ev, root, s);
        const opened = ev.calls.get('search_traces') ?? 0;
        if (open && opened < 1 + s.phase1_opens) {
          return hermes(`${open.summary.service} is abnormal and its excess is not explained yet; I open its children.`, 'search_traces', {
            parent_span_id: open.summary.ref,
          });
        }
        return print(dedupPods(found), 'These spans are abnormal and none of their children explains their excess: my first hypothesis.');
      }
      // Phase 2: go deeper below R0, then confirm the candidates with the metric agent.
      const r0Pods = new Set((r0 ?? []).map((r) => r.pod));
      const r0Spans = new Set([...ev.spans.values()].filter((k) => r0Pods.has(k.summary.pod)).map((k) => k.summary.span_id));
      const deeper = search(ev, root, s, r0Spans);
      const openedBefore = ctx.toolCalls.filter(
        (c) => c.name === 'search_traces' && c.turn > (ctx.toolCalls.find((x) => x.name === 'print_results')?.turn ?? Infinity),
      ).length;
      if (deeper.open && openedBefore < s.phase2_opens) {
        return hermes(`I inspect deeper below my hypothesis: the children of ${deeper.open.summary.service}.`, 'search_traces', {
          parent_span_id: deeper.open.summary.ref,
        });
      }
      const candidates = dedupPods([...deeper.found, ...search(ev, root, s).found]);
      for (const r of r0 ?? []) if (!candidates.some((c) => c.pod === r.pod)) candidates.push(r);
      const toCheck = candidates.slice(0, s.metric_checks).find((c) => c.pod && !ev.metrics.has(c.pod));
      if (toCheck && offered.has('search_fluctuating_metrics')) {
        return hermes(`I ask the metric agent about ${toCheck.pod} around the request.`, 'search_fluctuating_metrics', {
          service_name: toCheck.pod,
          timestamp: ts,
        });
      }
      if (!offered.has('print_results')) {
        // Still in step 1 with nothing left below R0: metrics of R0 count as deeper.
        const target = (r0 ?? candidates)[0]?.pod ?? root?.summary.pod ?? '';
        return hermes(`I check the metrics of ${target}.`, 'search_fluctuating_metrics', { service_name: target, timestamp: ts });
      }
      const confirmed = confirmedByMetrics(candidates, ev);
      return print(
        confirmed.length ? confirmed : candidates,
        confirmed.length
          ? 'Candidates confirmed by metrics beyond their band.'
          : 'No metric confirms a candidate; I keep the trace candidates.',
      );
    },
  };
}

registerPolicy({
  name: 'rclagent-script',
  kind: 'agent',
  protocol: 'rclagent',
  description: 'RCLAgent-scripted: Algorithm 1 as a DFS with rule-based deeming and 3-sigma confirmation (a stand-in, not RCLAgent)',
  settings: RclAgentScriptSettingsSchema,
  create: (_dataset, settings) => createRclAgentScript(settings),
});
