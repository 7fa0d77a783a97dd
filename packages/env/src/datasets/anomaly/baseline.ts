/**
 * Baseline-relative rule, for data without status codes: a request is anomalous when its
 * entry latency is far above the fault-free latency of the same endpoint, when one of its
 * spans is far slower than the same call in the baseline, when a span of it has an error
 * status, or (an exception or a wrong return value often slows nothing) when
 * its call pattern differs from the fault-free one: below some operation, a call that the
 * baseline always makes is missing, or a call the baseline never makes appears.
 */
import type { Span } from '../../types';
import { endpointOf, signature } from '../stores/baseline';
import { errorSpan, ms, type AnomalyContext, type AnomalyRule, type AnomalyVerdict } from './rule';

function slowEntry(entry: Span, { traces, baseline, settings }: AnomalyContext): AnomalyVerdict | undefined {
  const ep = endpointOf(traces, entry.trace_id);
  const usual = ep === undefined ? undefined : baseline.endpoint(ep);
  if (!usual || usual.count < settings.min_baseline_count || usual.meanUs <= 0) return undefined;
  const limit = Math.max(settings.latency_factor * usual.meanUs, usual.meanUs + settings.latency_sigma * usual.stdUs);
  if (entry.duration_us <= limit) return undefined;
  const ratio = entry.duration_us / usual.meanUs;
  return { reason: `entry ${ms(entry.duration_us)} vs usual ${ms(usual.meanUs)} of ${ep} (${ratio.toFixed(1)}x)`, score: ratio };
}

function slowSpan(entry: Span, { traces, baseline, settings }: AnomalyContext): AnomalyVerdict | undefined {
  if (settings.span_slowdown_ms <= 0) return undefined;
  let worst: { span: Span; meanUs: number } | undefined;
  for (const span of traces.trace(entry.trace_id)) {
    if (span === entry) continue;
    const usual = baseline.duration(span);
    if (!usual || usual.count < settings.min_baseline_count) continue;
    const limit = Math.max(settings.latency_factor * usual.meanUs, usual.meanUs + settings.latency_sigma * usual.stdUs);
    const excess = span.duration_us - usual.meanUs;
    if (span.duration_us <= limit || excess < settings.span_slowdown_ms * 1000) continue;
    if (!worst || excess > worst.span.duration_us - worst.meanUs) worst = { span, meanUs: usual.meanUs };
  }
  if (!worst) return undefined;
  const ratio = worst.span.duration_us / worst.meanUs;
  return {
    reason: `span ${signature(worst.span)} took ${ms(worst.span.duration_us)} vs usual ${ms(worst.meanUs)} (${ratio.toFixed(1)}x)`,
    score: ratio,
  };
}

function changedCalls(entry: Span, { traces, baseline, settings }: AnomalyContext): AnomalyVerdict | undefined {
  const changes: string[] = [];
  for (const span of traces.trace(entry.trace_id)) {
    const usual = baseline.childPresence(span);
    if (!usual || usual.occurrences < settings.min_baseline_count) continue;
    const actual = new Set(traces.children(span.span_id).map(signature));
    for (const [sig, c] of usual.children) {
      if (c.presence === 1 && !actual.has(sig)) changes.push(`missing ${sig} under ${signature(span)}`);
    }
    for (const sig of actual) {
      if (!usual.children.has(sig)) changes.push(`unusual ${sig} under ${signature(span)}`);
    }
  }
  if (changes.length === 0) return undefined;
  const more = changes.length > 2 ? ` (+${changes.length - 2} more)` : '';
  return { reason: `call pattern changed: ${changes.slice(0, 2).join('; ')}${more}`, score: changes.length };
}

export const baselineRule: AnomalyRule = {
  name: 'baseline',
  judge(entry, ctx) {
    const failed = errorSpan(entry, ctx.traces);
    if (failed) return { reason: `span ${signature(failed)} has status ${failed.status_code ?? 'error'}`, score: 1 };
    return slowEntry(entry, ctx) ?? slowSpan(entry, ctx) ?? (ctx.settings.call_pattern ? changedCalls(entry, ctx) : undefined);
  },
};
