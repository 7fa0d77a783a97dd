/** Compares the calls below a span with the usual child pattern of spans like it. */
import { signature } from '../datasets/stores/baseline';
import type { Baseline, Span } from '../types';

export interface PatternDiff {
  /** Usual calls (service operation, made at least `minRate` times per occurrence) absent this time. */
  missing: string[];
  /** Calls present this time that spans like this one usually do not make. */
  added: string[];
  /** False when the baseline has no pattern for this context. */
  known: boolean;
}

export function diffCalls(baseline: Baseline, parent: Span, children: Span[], minRate: number): PatternDiff {
  const usual = baseline.childPattern(parent);
  if (!usual) return { missing: [], added: [], known: false };
  const seen = new Set(children.map(signature));
  const missing = [...usual]
    .filter(([k, rate]) => rate >= minRate && !seen.has(k))
    .map(([k]) => k)
    .sort();
  const added = [...seen].filter((k) => !usual.has(k)).sort();
  return { missing, added, known: true };
}

/** A call signature ("service operation") of an error handler, e.g. Spring's BasicErrorController.error. */
export const isErrorHandler = (sig: string): boolean => /\berror\b/i.test(sig.slice(sig.indexOf(' ') + 1));
