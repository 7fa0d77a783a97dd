/**
 * Largest-self-time baseline: in the case's trace, the pod whose spans spent the most time
 * in themselves (not waiting on children) is the most suspicious. With a baseline, the
 * usual self time of each span (its usual duration less its children's usual durations)
 * is subtracted first, so pods that are always slow do not win every case.
 */
import { z } from 'zod';
import type { Baseline, Case, Dataset, RootCause, Span } from '../types';
import { registerPolicy, type Ranker } from './registry';
import { selfTimeUs } from './trace-math';

export const SelfTimeSettingsSchema = z.strictObject({
  /** Subtract each span's usual self time from the fault-free baseline where known. Default true. */
  relative_to_baseline: z.boolean().default(true),
  /** Most components in the answer. Default 10. */
  max_answers: z.number().int().min(1).default(10),
});
export type SelfTimeSettings = z.infer<typeof SelfTimeSettingsSchema>;

/** Usual self time of a span: usual duration less its children's usual durations; 0 when unknown. */
function usualSelfUs(baseline: Baseline, span: Span, children: Span[]): number {
  const own = baseline.duration(span);
  if (!own) return 0;
  let kids = 0;
  for (const c of children) {
    const d = baseline.duration(c);
    if (!d) return 0;
    kids += d.meanUs;
  }
  return Math.max(0, own.meanUs - kids);
}

export function createSelfTimeRanker(dataset: Dataset, settings: SelfTimeSettings): Ranker {
  const { traces, baseline, topology } = dataset;
  return {
    rank(c: Case): RootCause[] {
      const score = new Map<string, number>();
      for (const span of traces.trace(c.trace_id)) {
        const children = traces.children(span.span_id);
        const self = selfTimeUs(span, children);
        const excess = settings.relative_to_baseline ? self - usualSelfUs(baseline, span, children) : self;
        score.set(span.pod, (score.get(span.pod) ?? 0) + excess);
      }
      return [...score]
        .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
        .slice(0, settings.max_answers)
        .map(([pod, s]) => ({
          service: topology.serviceOfPod(pod),
          pod,
          reason: `self time ${(s / 1000).toFixed(1)} ms ${settings.relative_to_baseline ? 'above usual' : 'in this trace'}`,
        }));
    },
  };
}

registerPolicy({
  name: 'selftime',
  kind: 'ranker',
  description: 'pod with the largest self time (span duration less its children) in the case trace',
  settings: SelfTimeSettingsSchema,
  create: createSelfTimeRanker,
});
