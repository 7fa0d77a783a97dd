/**
 * Scripted expert for the `rot` protocol, played the way an SRE reads a trace: open the
 * entry span, keep opening the child that carries the excess latency, the changed call
 * pattern or the error, then check the suspects' metrics and logs, and print a ranked list.
 * It reads only the structured data of its own observations, never the ground truth; its
 * correct conversations are the SFT data of stage 1.
 */
import { z } from 'zod';
import type { AssistantMessage, Dataset, Policy, PolicyContext, RootCause } from '../../types';
import { registerPolicy } from '../registry';
import { interest, rankSuspects, type Suspect } from './decide';
import { type Evidence, gatherEvidence, isFast, isSlow, type KnownSpan, otherChanges, raisedError } from './evidence';
import { type EvidenceKind, evidenceKinds, type SuspectSettings } from './kinds/kind';
import { hermes, spanName, vsUsual } from './messages';
import { type Check, checks, type PlanSettings, turnsForChecks } from './plan';

export const ExpertSettingsSchema = z.object({
  /** Turns kept for log and metric checks of the top suspects, unless a strong lead is still open in the trace. Default 3. */
  confirmations: z
    .number()
    .int()
    .min(0)
    .default(3)
    .describe('Turns kept for log and metric checks of the top suspects, unless a strong lead is still open in the trace. Default 3.'),
  /** How many of the top suspects get their logs checked (then the leader's metrics). Default 3. */
  log_checks: z
    .number()
    .int()
    .min(0)
    .default(3)
    .describe("How many of the top suspects get their logs checked (then the leader's metrics). Default 3."),
  /** Besides the tool's SLOW mark, a span is slow when this many usual standard deviations above its usual duration. Default 3. */
  slow_z: z
    .number()
    .positive()
    .default(3)
    .describe("Besides the tool's SLOW mark, a span is slow when this many usual standard deviations above its usual duration. Default 3."),
  /** A span is cut short when it lasts at most this fraction of its usual duration. Default 0.5. */
  fast_ratio: z
    .number()
    .gt(0)
    .lt(1)
    .default(0.5)
    .describe('A span is cut short when it lasts at most this fraction of its usual duration. Default 0.5.'),
  /** Interest of a span (see decide.ts) from which it is still followed in the turns kept for checks. Default 1. */
  strong_lead: z
    .number()
    .positive()
    .default(1)
    .describe(
      'Interest of a span (how strongly its evidence points at a fault; packages/env/src/policies/expert/decide.ts) from which it is still followed in the turns kept for checks. Default 1.',
    ),
  /** An error log template supports a suspect when new or at least this many times its usual rate. Default 3. */
  log_ratio: z
    .number()
    .positive()
    .default(3)
    .describe('An error log template supports a suspect when new or at least this many times its usual rate. Default 3.'),
  /** Most root causes in the final answer. Default 5. */
  max_answers: z.number().int().min(1).default(5).describe('Most root causes in the final answer. Default 5.'),
  /**
   * Log checks of whole nodes (every pod on the node at once) seen in the trace, before the
   * per-suspect checks: exception and return faults barely move latency but log error
   * templates new to the service. Default 3, chosen by leave-one-fault-out (scripts/expert-split.ts).
   */
  log_survey: z
    .number()
    .int()
    .min(0)
    .default(3)
    .describe(
      'Log checks of whole nodes (every pod on the node at once) seen in the trace, before the per-suspect checks: exception and return faults barely move latency but log error templates new to the service. Default 3, chosen by leave-one-fault-out (scripts/expert-split.ts).',
    ),
  /**
   * Turns kept for checks even while a strong lead is open in the trace (unless it carries the
   * request's delay, slow_path_share). Default 3, chosen by leave-one-fault-out (scripts/expert-split.ts).
   */
  lead_checks: z
    .number()
    .int()
    .min(0)
    .default(3)
    .describe(
      "Turns kept for checks even while a strong lead is open in the trace (unless it carries the request's delay, slow_path_share). Default 3, chosen by leave-one-fault-out (scripts/expert-split.ts).",
    ),
  /** Suspect score of the last callee of a span whose error handler ran (the call that threw). Default 0.6, chosen by leave-one-fault-out. */
  caller_error_weight: z
    .number()
    .nonnegative()
    .default(0.6)
    .describe(
      'Suspect score of the last callee of a span whose error handler ran (the call that threw). Default 0.6, chosen by leave-one-fault-out.',
    ),
  /** Suspect score of error log templates above their usual rate but not new (they rise with any fault upstream). Default 0.5. */
  risen_log_weight: z
    .number()
    .nonnegative()
    .default(0.5)
    .describe('Suspect score of error log templates above their usual rate but not new (they rise with any fault upstream). Default 0.5.'),
  /** Suspect score of a pod whose usual log statements went silent around the request (search_logs' silent list). Default 1.5, chosen by leave-one-fault-out. */
  silent_log_weight: z
    .number()
    .nonnegative()
    .default(1.5)
    .describe(
      "Suspect score of a pod whose usual log statements went silent around the request (search_logs' silent list). Default 1.5, chosen by leave-one-fault-out.",
    ),
  /** Interest of a span cut short (at most fast_ratio of its usual duration) when choosing which span to open next. Default 0.6. */
  fast_lead_weight: z
    .number()
    .nonnegative()
    .default(0.6)
    .describe(
      'Interest of a span cut short (at most fast_ratio of its usual duration) when choosing which span to open next. Default 0.6.',
    ),
  /**
   * Added to fast_lead_weight when the cut-short span's caller is not slow: an exception ends the
   * request early, while under a slow caller a fast call is usually noise next to the slow one.
   * Default 0.7, chosen by leave-one-fault-out (scripts/expert-split.ts).
   */
  calm_fast_lead_bonus: z
    .number()
    .nonnegative()
    .default(0.7)
    .describe(
      "Added to fast_lead_weight when the cut-short span's caller is not slow: an exception ends the request early, while under a slow caller a fast call is usually noise next to the slow one. Default 0.7, chosen by leave-one-fault-out (scripts/expert-split.ts).",
    ),
  /**
   * In a slow request, a slow lead whose excess over its usual duration is at least this share
   * of the entry span's excess carries the request's delay: while it is open, no turn is kept
   * for checks, so the descent reaches a deep callee within D_max. null: never. Default 1,
   * chosen by leave-one-fault-out (scripts/expert-split.ts, docs/expert-tuning.md).
   */
  slow_path_share: z
    .number()
    .positive()
    .nullable()
    .default(1)
    .describe(
      "In a slow request, a slow lead whose excess over its usual duration is at least this share of the entry span's excess carries the request's delay: while it is open, no turn is kept for checks, so the descent reaches a deep callee within D_max. null: never. Default 1, chosen by leave-one-fault-out (scripts/expert-split.ts, docs/expert-tuning.md).",
    ),
});
export type ExpertSettings = z.infer<typeof ExpertSettingsSchema>;

/** The expert's settings in the form the kinds of evidence take. */
export function suspectSettings(s: ExpertSettings): SuspectSettings {
  return {
    slowZ: s.slow_z,
    fastRatio: s.fast_ratio,
    logRatio: s.log_ratio,
    callerErrorWeight: s.caller_error_weight,
    risenLogWeight: s.risen_log_weight,
    silentLogWeight: s.silent_log_weight,
    fastLeadWeight: s.fast_lead_weight,
    calmFastLeadBonus: s.calm_fast_lead_bonus,
  };
}

function planSettings(s: ExpertSettings): PlanSettings {
  return {
    logSurvey: s.log_survey,
    logChecks: s.log_checks,
    confirmations: s.confirmations,
    leadChecks: s.lead_checks,
    strongLead: s.strong_lead,
    slowPathShare: s.slow_path_share,
    slowZ: s.slow_z,
  };
}

/** The unopened span most worth opening; when nothing points anywhere, the latest call deepest down. */
function nextSpan(
  ev: Evidence,
  s: ExpertSettings,
  kinds: readonly EvidenceKind[],
): { span: KnownSpan; why: 'evidence' | 'follow'; value: number } | undefined {
  let best: KnownSpan | undefined;
  let bestV = 0;
  for (const k of ev.spans.values()) {
    const v = interest(ev, k, suspectSettings(s), kinds);
    if (v > bestV) {
      best = k;
      bestV = v;
    }
  }
  if (best) return { span: best, why: 'evidence', value: bestV };
  const onward = [...ev.spans.values()]
    .filter((k) => k.children === undefined && k.summary.child_count > 0)
    .sort((a, b) => b.depth - a.depth || b.summary.start_us - a.summary.start_us);
  return onward[0] && { span: onward[0], why: 'follow', value: 0 };
}

function openReason(k: KnownSpan, why: 'evidence' | 'follow', s: ExpertSettings): string {
  const sum = k.summary;
  if (why === 'follow') return `Nothing stands out yet, so I follow the call path below ${spanName(sum)}.`;
  if (raisedError(sum)) return `${spanName(sum)} ran its error handler this time; I open it to find the call that failed.`;
  const other = otherChanges(sum);
  if (other.missing.length) {
    return `${spanName(sum)} did not make its usual calls (${other.missing.slice(0, 2).join('; ')}); I open it to see what it called before it stopped.`;
  }
  if (isSlow(sum, s.slow_z)) return `${spanName(sum)} ${vsUsual(sum)}; the delay continues below it, so I open its children.`;
  if (isFast(sum, s.fast_ratio)) return `${spanName(sum)} ${vsUsual(sum)}, as if cut short; I open it to see where it stopped.`;
  return `Its caller looks abnormal, and ${spanName(sum)} is among the calls it made last; I open it.`;
}

function checkReason(c: Check, first: boolean): string {
  if (!c.suspect) {
    return `The request ran on node ${c.target}; I compare the error logs of all its pods around the request with their usual rate, since a failing call need not be slow.`;
  }
  const why = c.suspect.reasons[0] ?? 'it is on the path of the request';
  if (c.tool === 'search_logs') {
    return `${first ? 'My main suspect' : 'Another suspect'} is ${c.suspect.service} (${why}); I compare its error logs around the request with their usual rate.`;
  }
  return `I check whether the metrics of ${c.suspect.pod} left their usual band around the request time.`;
}

/** The entry span as the prompt names it (an alias when aliases are on), else its id. */
function entryRef(ctx: PolicyContext): string {
  for (const m of ctx.messages) {
    const found = m.role === 'user' ? /Entry span: (\S+)/.exec(m.content) : null;
    if (found) return found[1];
  }
  return ctx.case.entry_span_id;
}

function answer(ev: Evidence, suspects: Suspect[], max: number): RootCause[] {
  const out: RootCause[] = suspects.map((s) => ({ service: s.service, pod: s.pod, reason: s.reasons.slice(0, 2).join('; ') }));
  // Fill with the other pods on the opened path, deepest first: the fault is rarely above the evidence.
  const rest = [...ev.spans.values()].sort((a, b) => b.depth - a.depth || b.summary.start_us - a.summary.start_us);
  for (const k of rest) {
    if (!out.some((r) => r.pod === k.summary.pod))
      out.push({ service: k.summary.service, pod: k.summary.pod, reason: 'on the path of the request' });
  }
  return out.slice(0, max);
}

/** `kinds`: the kinds of evidence weighed (default: every registered kind). */
export function createExpert(_dataset: Dataset, settings: ExpertSettings, kinds: readonly EvidenceKind[] = evidenceKinds()): Policy {
  return {
    name: 'expert',
    async next(ctx: PolicyContext): Promise<AssistantMessage> {
      const msg = decide(ctx);
      // Pod names as the observations show them (aliases with pod_aliases on): the teacher's text is the model's to copy.
      return ctx.show ? { ...msg, content: ctx.show(msg.content) } : msg;
    },
  };

  function decide(ctx: PolicyContext): AssistantMessage {
    const ev = gatherEvidence(ctx.toolCalls.filter((c) => c.name !== 'print_results'));
    const offered = new Set(ctx.tools.map((t) => t.name));
    // Every turn spends one of the episode's D_max, a failed call included (a detour in teacher
    // data). The last of them is kept for print_results, so the expert answers on its own.
    const left = ctx.d_max - 1 - ctx.turn;
    const suspects = rankSuspects(ev, suspectSettings(settings), kinds);
    const print = (): AssistantMessage => {
      const root_causes = answer(ev, suspects, settings.max_answers);
      const top = suspects[0];
      const lead = top
        ? `The evidence points to ${top.pod} first: ${top.reasons.slice(0, 3).join('; ')}.`
        : 'No span stood out clearly, so I list the components on the path of the request, deepest first.';
      return hermes(`${lead} I list the suspects, most likely first.`, 'print_results', { root_causes });
    };
    if (ctx.final || left <= 0 || !offered.has('search_traces')) return print();
    if (!ev.calls.get('search_traces')) {
      const c = ctx.case;
      return hermes(
        `The request took ${(c.entry_duration_us / 1000).toFixed(1)} ms end to end; I start by listing the spans below its entry span.`,
        'search_traces',
        { parent_span_id: entryRef(ctx) },
      );
    }
    const todo = checks(suspects, ev, offered, planSettings(settings));
    const next = nextSpan(ev, settings, kinds);
    const reserve = turnsForChecks(ev, next, todo.length, planSettings(settings));
    if (next && left > reserve) {
      return hermes(openReason(next.span, next.why, settings), 'search_traces', { parent_span_id: next.span.summary.ref });
    }
    const check = todo[0];
    if (check) {
      const ts = Math.round(ctx.case.timestamp_us / 1e6);
      const first = check.suspect !== undefined && check.suspect === suspects[0];
      return hermes(checkReason(check, first), check.tool, { service_name: check.target, timestamp: ts });
    }
    return print();
  }
}

registerPolicy({
  name: 'expert',
  kind: 'agent',
  description: 'scripted SRE expert playing the rot protocol (teacher of the SFT data)',
  settings: ExpertSettingsSchema,
  create: createExpert,
});
