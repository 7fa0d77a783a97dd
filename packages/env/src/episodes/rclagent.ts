/**
 * `rclagent`: RCLAgent's coordinator (../shared/seeds/001, Sec. IV-C, Eq. 6-8).
 * (1) Initial reasoning (Eq. 6): the trace and format agents only (no metrics, no logs), ending
 *     with R0.
 * (2) Critical reflection (Eq. 7): step 1 offers A without format and asks to inspect deeper; a
 *     call counts as deeper only when it is new and goes below R0 (search_traces on a span of an
 *     R0 component or under one, or metrics of an R0 component). Step 2 then offers all of A with
 *     the hint that the cause often lies downstream; its answer is R1.
 * (3) Final review (Eq. 8): format only, given R0 and R1; its answer is the episode's. When that
 *     turn fails, the answer is the union R1 then R0 (R_f = A_format(R(R0) ∪ R(S1))), forced.
 */
import type { Dataset, RootCause, ToolCallRecord } from '../types';
import type { Toolbox } from '../tools/toolbox';
import { casePrompt, RCL_INITIAL, rclFinal, rclReflection, RCL_DOWNSTREAM, systemPrompt } from './prompts';
import { registerProtocol } from './registry';

const METRICS_TOOL = 'search_fluctuating_metrics';
const TRACES_TOOL = 'search_traces';

export function hypothesisText(answer: RootCause[] | undefined): string {
  if (!answer?.length) return 'none';
  return answer.map((r) => r.pod ?? r.service ?? r.node).join(', ');
}

/** Components an answer names, with the services of its pods. */
function componentsOf(dataset: Dataset, answer: RootCause[]): Set<string> {
  const out = new Set<string>();
  for (const r of answer) {
    for (const n of [r.pod, r.service, r.node]) if (n) out.add(n);
    const svc = r.pod ? dataset.topology.serviceOfPod(r.pod) : undefined;
    if (svc) out.add(svc);
  }
  return out;
}

/** Whether a successful new call goes below R0 (or any new call, when there is no R0). */
export function goesDeeper(toolbox: Toolbox, call: ToolCallRecord, r0: RootCause[] | undefined): boolean {
  if (!r0?.length) return true;
  const { dataset } = toolbox.ctx;
  const named = componentsOf(dataset, r0);
  if (call.name === TRACES_TOOL) {
    const id = (toolbox.canonical(call.name, call.arguments) as { parent_span_id: string }).parent_span_id;
    for (let s = dataset.traces.span(id); s; s = s.parent_id === null ? undefined : dataset.traces.span(s.parent_id)) {
      if (named.has(s.pod) || named.has(s.service)) return true;
    }
    return false;
  }
  if (call.name === METRICS_TOOL) {
    return toolbox.argComponents(call.name, call.arguments).some((c) => named.has(c) || named.has(dataset.topology.serviceOfPod(c) ?? ''));
  }
  return false;
}

/** Eq. 8's union: R1's items first, then R0's items naming something not named yet. */
export function unionAnswer(r1: RootCause[] | undefined, r0: RootCause[] | undefined): RootCause[] {
  const out: RootCause[] = [];
  const seen = new Set<string>();
  for (const r of [...(r1 ?? []), ...(r0 ?? [])]) {
    const key = r.pod ?? r.service ?? r.node ?? '';
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(r);
  }
  return out;
}

registerProtocol({
  name: 'rclagent',
  async play(session, settings) {
    const { toolbox } = session;
    const { initial_turns: initialTurns, reflection_turns: reflectionTurns, tools } = settings.rclagent;
    const all = tools;
    const initialTools = all.filter((t) => t !== METRICS_TOOL);
    const exploring = all.filter((t) => t !== 'print_results');
    const budget = `You work in three phases with at most ${initialTurns} and ${reflectionTurns} tool calls, then a final answer.`;
    session.say('system', systemPrompt(toolbox.specs(all), budget));
    session.say('user', `${casePrompt(toolbox.ctx.dataset, session.kase, toolbox)}\n\n${RCL_INITIAL}`);

    let r0: RootCause[] | undefined;
    for (let t = 0; t < initialTurns && !r0; t++) {
      const out = await session.turn(initialTools, false);
      if (out.kind === 'policy_error') return session.finish('rclagent', 'policy_error', null);
      if (out.kind === 'answered') r0 = out.answer;
    }

    session.say('user', rclReflection(hypothesisText(r0)));
    let deeper = false;
    let r1: RootCause[] | undefined;
    for (let t = 0; t < reflectionTurns; t++) {
      const out = await session.turn(deeper ? all : exploring, false);
      if (out.kind === 'policy_error') return session.finish('rclagent', 'policy_error', null);
      if (out.kind === 'answered') {
        r1 = out.answer;
        break;
      }
      if (!deeper && out.kind === 'called' && out.newStep && goesDeeper(toolbox, out.call, r0)) {
        deeper = true;
        session.noteOnLast(RCL_DOWNSTREAM);
      }
    }

    session.say('user', rclFinal(hypothesisText(r0), hypothesisText(r1)));
    const out = await session.turn(['print_results'], true);
    if (out.kind === 'policy_error') return session.finish('rclagent', 'policy_error', null);
    if (out.kind === 'answered') return session.finish('rclagent', 'answered', out.answer);
    const union = unionAnswer(r1, r0);
    return union.length ? session.finish('rclagent', 'forced_answer', union) : session.finish('rclagent', 'no_answer', null);
  },
});
