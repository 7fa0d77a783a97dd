/**
 * search_traces(parent_span_id): the direct children of a span (ThinkFL Eq. 5), served from
 * the trace index, each distilled against the fault-free baseline: duration versus its usual,
 * and calls missing or added versus the usual child pattern.
 */
import { z } from 'zod';
import type { Span } from '../types';
import { boundItems, errorObservation, okObservation, shown } from './bound';
import { diffCalls, isErrorHandler, type PatternDiff } from './call-pattern';
import { registerTool, type ToolContext } from './registry';
import { isoOfUs } from './timestamp';

/** A span as the tool reports it: the span's own fields and how it compares with the baseline. */
export interface SpanSummary extends Pick<Span, 'service' | 'pod' | 'node' | 'operation' | 'status'> {
  span_id: string;
  /** The name the model sees (alias when span aliases are on). */
  ref: string;
  start_us: number;
  duration_us: number;
  /** Usual duration of spans like this one; undefined without baseline. */
  usual_mean_us?: number;
  usual_std_us?: number;
  /** duration_us / usual_mean_us. */
  ratio?: number;
  slow: boolean;
  child_count: number;
  /** Calls below this span versus the usual pattern. */
  calls: PatternDiff;
}

export interface SearchTracesData {
  parent: SpanSummary;
  children: SpanSummary[];
  /** Children left out of the text (and of `children`) by the item limit. */
  omitted: number;
}

const args = z.object({
  parent_span_id: z.string().min(1).describe('Span id whose direct child spans to list'),
});

function summarize(ctx: ToolContext, span: Span): SpanSummary {
  const { dataset, settings } = ctx;
  const usual = dataset.baseline.duration(span);
  const kids = dataset.traces.children(span.span_id);
  const ratio = usual && usual.meanUs > 0 ? span.duration_us / usual.meanUs : undefined;
  return {
    span_id: span.span_id,
    ref: ctx.aliases.ref(span.span_id),
    service: span.service,
    pod: span.pod,
    node: span.node,
    operation: span.operation,
    start_us: span.start_us,
    duration_us: span.duration_us,
    status: span.status,
    usual_mean_us: usual?.meanUs,
    usual_std_us: usual?.stdUs,
    ratio,
    slow: ratio !== undefined && ratio >= settings.slow_ratio,
    child_count: kids.length,
    calls: diffCalls(dataset.baseline, span, kids, settings.missing_call_min_rate),
  };
}

const ms = (us: number) => `${(us / 1000).toFixed(1)}ms`;

/** A span lasting at most this fraction of its usual duration (and 1 ms less) was cut short. */
const CUT_SHORT_RATIO = 0.5;

/** What is abnormal about a span, as one word, strongest first (tool_settings.verdicts). */
/** search_traces' verdicts, most abnormal first. */
export const VERDICTS = ['error', 'missing', 'slow', 'short', 'usual'] as const;
export type Verdict = (typeof VERDICTS)[number];

/** The span's own service started an error handler below it this time: an exception was caught there. */
export const raisedError = (s: SpanSummary): boolean =>
  s.status === 'error' || s.calls.added.some((a) => isErrorHandler(a) && a.startsWith(`${s.service} `));

export function verdictOf(s: SpanSummary): Verdict {
  if (raisedError(s)) return 'error';
  if (s.calls.missing.length) return 'missing';
  if (s.slow) return 'slow';
  const cut = s.ratio !== undefined && s.ratio <= CUT_SHORT_RATIO && (s.usual_mean_us ?? 0) - s.duration_us > 1000;
  return cut ? 'short' : 'usual';
}

/**
 * Spans that can be opened (with children) before leaves, then the most abnormal first: by
 * verdict, the slow by how many times their usual; stable otherwise. The scripted expert then
 * opens the first listed child on every call (scripts/heldout-rules.ts), so a small model learns
 * its calls as one copy.
 */
function verdictRank(a: SpanSummary, b: SpanSummary): number {
  if (a.child_count > 0 !== b.child_count > 0) return Number(b.child_count > 0) - Number(a.child_count > 0);
  const va = verdictOf(a);
  const vb = verdictOf(b);
  if (va !== vb) return VERDICTS.indexOf(va) - VERDICTS.indexOf(vb);
  if (va === 'slow') return (b.ratio ?? 0) - (a.ratio ?? 0);
  return Number(b.child_count > 0) - Number(a.child_count > 0);
}

function describe(s: SpanSummary, verdicts: boolean): string {
  const usual =
    s.usual_mean_us === undefined
      ? 'usual n/a'
      : `usual ${ms(s.usual_mean_us)}, x${(s.ratio ?? 0).toFixed(2)}${s.slow && !verdicts ? ' SLOW' : ''}`;
  const parts = [
    verdicts
      ? `${s.ref} ${verdictOf(s)} ${s.service} pod=${s.pod} ${isoOfUs(s.start_us)}`
      : `${s.ref} ${isoOfUs(s.start_us)} ${s.service} pod=${s.pod}`,
  ];
  if (s.node) parts.push(`node=${s.node}`);
  parts.push(`"${s.operation}" ${ms(s.duration_us)} (${usual})`);
  if (s.status !== 'unset') parts.push(`status=${s.status}`);
  parts.push(`children=${s.child_count}`);
  if (s.calls.missing.length) parts.push(`missing calls=[${s.calls.missing.join('; ')}]`);
  if (s.calls.added.length) parts.push(`added calls=[${s.calls.added.join('; ')}]`);
  return parts.join(' ');
}

/** Most anomalous first, so the item limit drops the least telling children. */
function salience(s: SpanSummary): number {
  return (s.ratio ?? 1) + (s.status === 'error' ? 100 : 0) + 10 * (s.calls.missing.length + s.calls.added.length);
}

registerTool({
  name: 'search_traces',
  description:
    'List the direct child spans of a span: time, span id, service, pod, operation, duration compared with its usual duration, status, number of children, and calls missing or added compared with the usual call pattern.',
  args,
  terminal: false,
  canonical: (ctx, a) => ({ parent_span_id: ctx.aliases.resolve(a.parent_span_id) }),
  argComponents: () => [],
  run(ctx, a) {
    const id = ctx.aliases.resolve(a.parent_span_id);
    const parent = ctx.dataset.traces.span(id);
    if (!parent) {
      return errorObservation(
        ctx.settings,
        `unknown span id "${shown(a.parent_span_id)}": pass a span id shown earlier in this conversation`,
      );
    }
    const parentSummary = summarize(ctx, parent);
    const all = ctx.dataset.traces.children(id).map((c) => summarize(ctx, c));
    const ranked = [...all].sort((x, y) => salience(y) - salience(x));
    const { shown: kept, note } = boundItems(ranked, ctx.settings.max_items, 'child spans');
    const keptSet = new Set(kept);
    const verdicts = ctx.settings.verdicts;
    const children = all.filter((c) => keptSet.has(c));
    if (verdicts) children.sort(verdictRank);
    const lines = [`Span ${describe(parentSummary, verdicts)}`];
    lines.push(children.length ? `${all.length} child span(s):` : 'No child spans: this span is a leaf.');
    for (const c of children) lines.push(`- ${describe(c, verdicts)}`);
    if (note) lines.push(note);
    const data: SearchTracesData = { parent: parentSummary, children, omitted: all.length - children.length };
    const components = [parent, ...children].flatMap((s) => [s.service, s.pod, ...(s.node ? [s.node] : [])]);
    return okObservation(ctx.settings, lines.join('\n'), data, components, !!note);
  },
});
