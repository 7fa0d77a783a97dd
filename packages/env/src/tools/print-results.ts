/** print_results(root_causes): the ranked answer; a valid call ends the episode. */
import { z } from 'zod';
import type { RootCause } from '../types';
import { boundItems, errorObservation, okObservation, shown as shownArg } from './bound';
import { registerTool, type ToolContext } from './registry';

export interface PrintResultsData {
  answer: RootCause[];
}

const name = z.string().trim().min(1).max(200);

const fields = z.object({
  node: name.optional().describe('Node (host) name'),
  service: name.optional().describe('Service name'),
  pod: name.optional().describe('Pod name'),
  reason: z.string().max(2000).optional().describe('Short reason'),
  type: z.string().trim().min(1).max(100).optional().describe('Fault type, e.g. cpu_contention'),
  time: z.string().trim().min(1).max(40).optional().describe('Occurrence time, YYYY-MM-DD HH:MM:SS'),
});

const rootCause = fields
  .extend({ span: name.optional() })
  .refine((r) => r.node !== undefined || r.service !== undefined || r.pod !== undefined || r.span !== undefined, {
    message: 'each root cause needs at least one of node, service, pod, span',
  });

const args = z.object({
  root_causes: z.array(rootCause).min(1).describe('Root causes, most likely first'),
});

/**
 * `span` (a span id shown earlier, standing for its service and pod) is accepted but not offered:
 * only a model fine-tuned on answers by span (stages.priming.sft.answer_spans) uses it, and every
 * other run keeps the schema, prompts and tiny tokenizer it had.
 */
const offered = z.object({
  root_causes: z.array(fields).min(1).describe('Root causes, most likely first'),
});

function named(ctx: ToolContext, r: RootCause & { span?: string }): string[] {
  const span = r.span === undefined ? undefined : ctx.dataset.traces.span(ctx.aliases.resolve(r.span));
  return [r.node, r.service, r.pod, span?.pod]
    .filter((n): n is string => n !== undefined)
    .flatMap((n) => {
      const c = ctx.dataset.topology.resolve(ctx.pods.resolve(n));
      return c ? [c.service, c.pod, c.node].filter((x): x is string => !!x) : [];
    });
}

function describe(r: RootCause, i: number): string {
  const parts = (['node', 'service', 'pod'] as const).filter((k) => r[k] !== undefined).map((k) => `${k}=${r[k]}`);
  if (r.type) parts.push(`type=${r.type}`);
  if (r.time) parts.push(`time=${r.time}`);
  return `${i + 1}. ${parts.join(' ')}${r.reason ? ` (${r.reason.slice(0, 200)})` : ''}`;
}

registerTool({
  name: 'print_results',
  description:
    'Give the final answer: the root causes as a ranked list of {node, service, pod, reason}, most likely first. Ends the investigation.',
  args,
  offered,
  terminal: true,
  argComponents: (ctx, a) => a.root_causes.flatMap((r) => named(ctx, r)),
  run(ctx, a) {
    // A span named by the model (its alias with span aliases on) stands for its service and pod:
    // a small model copies a span alias far more reliably than a service name (notes/tiny-model.md).
    const unknown = a.root_causes.find((r) => r.span !== undefined && !ctx.dataset.traces.span(ctx.aliases.resolve(r.span)));
    if (unknown) {
      return errorObservation(
        ctx.settings,
        `unknown span id "${shownArg(unknown.span)}": pass a span id shown earlier in this conversation`,
      );
    }
    const answer: RootCause[] = a.root_causes.map((r) => {
      const out: RootCause = {};
      const span = r.span === undefined ? undefined : ctx.dataset.traces.span(ctx.aliases.resolve(r.span));
      if (r.node !== undefined) out.node = r.node;
      if (r.service !== undefined || span) out.service = r.service ?? span!.service;
      // A pod alias (pod aliases on) stands for the pod it was shown for; the answer names real pods.
      if (r.pod !== undefined || span) out.pod = r.pod !== undefined ? ctx.pods.resolve(r.pod) : span!.pod;
      if (r.reason !== undefined) out.reason = r.reason;
      if (r.type !== undefined) out.type = r.type;
      if (r.time !== undefined) out.time = r.time;
      return out;
    });
    const { shown, note } = boundItems(answer, ctx.settings.max_items, 'root causes');
    const lines = [`Recorded ${answer.length} root cause(s):`, ...shown.map(describe)];
    if (note) lines.push(note);
    const data: PrintResultsData = { answer };
    return okObservation(
      ctx.settings,
      lines.join('\n'),
      data,
      answer.flatMap((r) => named(ctx, r)),
      !!note,
    );
  },
});
