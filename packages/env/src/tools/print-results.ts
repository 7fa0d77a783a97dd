/** print_results(root_causes): the ranked answer; a valid call ends the episode. */
import { z } from 'zod';
import type { RootCause } from '../types';
import { boundItems, okObservation } from './bound';
import { registerTool, type ToolContext } from './registry';

export interface PrintResultsData {
  answer: RootCause[];
}

const name = z.string().trim().min(1).max(200);

const rootCause = z
  .object({
    node: name.optional().describe('Node (host) name'),
    service: name.optional().describe('Service name'),
    pod: name.optional().describe('Pod name'),
    reason: z.string().max(2000).optional().describe('Short reason'),
    type: z.string().trim().min(1).max(100).optional().describe('Fault type, e.g. cpu_contention'),
    time: z.string().trim().min(1).max(40).optional().describe('Occurrence time, YYYY-MM-DD HH:MM:SS'),
  })
  .refine((r) => r.node !== undefined || r.service !== undefined || r.pod !== undefined, {
    message: 'each root cause needs at least one of node, service, pod',
  });

const args = z.object({
  root_causes: z.array(rootCause).min(1).describe('Root causes, most likely first'),
});

function named(ctx: ToolContext, r: RootCause): string[] {
  return [r.node, r.service, r.pod]
    .filter((n): n is string => n !== undefined)
    .flatMap((n) => {
      const c = ctx.dataset.topology.resolve(n);
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
  description: 'Give the final answer: the root causes as a ranked list of {node, service, pod, reason}, most likely first. Ends the investigation.',
  args,
  terminal: true,
  argComponents: (ctx, a) => a.root_causes.flatMap((r) => named(ctx, r)),
  run(ctx, a) {
    const answer: RootCause[] = a.root_causes.map((r) => {
      const out: RootCause = {};
      if (r.node !== undefined) out.node = r.node;
      if (r.service !== undefined) out.service = r.service;
      if (r.pod !== undefined) out.pod = r.pod;
      if (r.reason !== undefined) out.reason = r.reason;
      if (r.type !== undefined) out.type = r.type;
      if (r.time !== undefined) out.time = r.time;
      return out;
    });
    const { shown, note } = boundItems(answer, ctx.settings.maxItems, 'root causes');
    const lines = [`Recorded ${answer.length} root cause(s):`, ...shown.map(describe)];
    if (note) lines.push(note);
    const data: PrintResultsData = { answer };
    return okObservation(ctx.settings, lines.join('\n'), data, answer.flatMap((r) => named(ctx, r)), !!note);
  },
});
