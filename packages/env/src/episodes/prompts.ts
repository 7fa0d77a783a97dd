/** The texts of an episode: task statement, the anomalous request, phase instructions. */
import type { Case, Dataset, ToolSpec } from '../types';
import type { Toolbox } from '../tools/toolbox';
import { isoOfUs } from '../tools/timestamp';

const TASK =
  'You are a site reliability engineer localizing the root cause of an anomalous request in a microservice system. ' +
  "Explore the request's distributed trace with the tools, one tool call per turn, following the spans that are slower " +
  'than usual or whose calls changed, and check metrics and logs of the components you suspect. ' +
  'Answer with print_results: a ranked list of root causes (node, service or pod), most likely first.';

function toolList(tools: ToolSpec[]): string {
  return tools.map((t) => `- ${t.name}: ${t.description}`).join('\n');
}

export function systemPrompt(tools: ToolSpec[], budget: string): string {
  return `${TASK}\n${budget}\n\nTools:\n${toolList(tools)}`;
}

/** The user message: the anomalous request's entry span. */
export function casePrompt(dataset: Dataset, c: Case, toolbox: Toolbox): string {
  const entry = dataset.traces.span(c.entry_span_id);
  const service = entry?.service ?? c.truth.service ?? 'unknown';
  const usual = entry ? dataset.baseline.duration(entry) : undefined;
  const usualText = usual ? ` (usual ${(usual.meanUs / 1000).toFixed(1)} ms)` : '';
  return [
    `An anomalous request was observed (trace ${c.trace_id}).`,
    `Entry span: ${toolbox.spanRef(c.entry_span_id)}`,
    `Service: ${service}${entry ? `, pod ${entry.pod}` : ''}`,
    `Operation: ${entry?.operation ?? 'unknown'}`,
    `Start time: ${isoOfUs(c.timestamp_us)} (Unix ${Math.floor(c.timestamp_us / 1e6)} s)`,
    `Duration: ${(c.entry_duration_us / 1000).toFixed(1)} ms${usualText}`,
    'Find the root cause.',
  ].join('\n');
}

/** The turns-left note of `rot` (episode setting turns_left_note). */
export function turnsLeft(n: number): string {
  return `[${n} tool turn${n === 1 ? '' : 's'} left]`;
}

export const FORCE_ANSWER =
  'You have used all your tool turns. Call print_results now with your ranked root causes; no other tool is available.';

export const RCL_INITIAL =
  'Phase 1, initial reasoning: recursively search the suspect traces (metrics are not available yet) and give a first hypothesis with print_results.';

export function rclReflection(hypothesis: string): string {
  return (
    `Phase 2, critical reflection: your hypothesis so far is ${hypothesis}. Even if you have defined the root cause, inspect deeper: ` +
    'search the traces below the suspected spans, or check the metrics of the suspected components. ' +
    'print_results is offered again once you have made a new call that goes deeper.'
  );
}

/** Step 2 of the reflection, once the policy went deeper (RCLAgent Fig. 7). */
export const RCL_DOWNSTREAM =
  '[The root cause often originates downstream; you may confirm it with metrics. print_results is available again.]';

export function rclFinal(initial: string, reflected: string): string {
  return (
    `Phase 3, final review: your initial answer was ${initial}; after reflection you answered ${reflected}. ` +
    'Rethink the whole investigation and return the correct root causes, most likely first, with print_results.'
  );
}
