/**
 * `rcaflow`: RCAFlow's execution (../shared/seeds/004) as an episode. The environment interprets
 * the workflow (tree.ts) with its branch stack; at each tool leaf the policy is offered that one
 * tool and chooses its arguments (the Executor); after a Selector and after a branch it reports
 * its confidence (report_confidence); at c <= theta the environment inserts a re-planning step
 * that offers every exploration tool. The answer is print_results, whose items may carry the
 * OpenRCA fields: component, reason and occurrence time.
 */
import type { SearchLogsData, SearchMetricsData, SearchTracesData } from '../../tools';
import type { Observation } from '../../types';
import { MAX_TOOL_TURNS } from '../settings';
import { casePrompt, systemPrompt } from '../prompts';
import { registerProtocol } from '../registry';
import { DEFAULT_WORKFLOW } from './default-workflow';
import { BtInterpreter, type Branch } from './tree';

export type RcaFlowRequest =
  | { kind: 'leaf'; step: string; tool: string; branch: string }
  | { kind: 'confidence'; after: 'selector' | 'branch'; leaves: { tool: string; success: boolean }[] }
  | { kind: 'replan'; leaves: { tool: string; success: boolean }[] }
  | { kind: 'final'; leaves: { tool: string; success: boolean }[] };

const EXPLORE = ['search_traces', 'search_fluctuating_metrics', 'search_logs'];

/** Whether a leaf's observation found what its step looks for: an abnormal child, metric or log template. */
export function foundAnomaly(tool: string, obs: Observation, logRatio: number): boolean {
  if (!obs.ok || obs.data === undefined) return false;
  if (tool === 'search_traces') {
    const d = obs.data as SearchTracesData;
    return d.children.some((c) => c.slow || c.status === 'error' || c.calls.missing.length > 0 || c.calls.added.length > 0);
  }
  if (tool === 'search_fluctuating_metrics') return (obs.data as SearchMetricsData).fluctuating.length > 0;
  if (tool === 'search_logs') return (obs.data as SearchLogsData).templates.some((t) => t.unseen_in_baseline || (t.ratio ?? 0) >= logRatio);
  return true;
}

const allLeaves = (stack: readonly Branch[]) => stack.flatMap((b) => b.workspace);

registerProtocol({
  name: 'rcaflow',
  async play(session, settings) {
    const { toolbox } = session;
    const rf = settings.rcaflow;
    const workflow = rf.workflow ?? DEFAULT_WORKFLOW;
    const offeredAll = [...EXPLORE, 'report_confidence', 'print_results'];
    session.say(
      'system',
      systemPrompt(
        toolbox.specs(offeredAll),
        `A workflow guides the steps; each step offers one tool. Report your confidence when asked; at ${rf.theta} or below you re-plan.`,
      ),
    );
    session.say('user', casePrompt(toolbox.ctx.dataset, session.kase, toolbox));
    let failed = false;
    const budget = MAX_TOOL_TURNS - 1;
    const alive = () => !failed && session.turns.length < budget;
    const play = async (tools: string[], request: RcaFlowRequest, text: string) => {
      session.environment = request;
      session.say('user', text);
      const out = await session.turn(tools, false);
      if (out.kind === 'policy_error') failed = true;
      return out;
    };
    const interpreter = new BtInterpreter(
      workflow,
      {
        async leaf(node, stack) {
          const step = node.name ?? node.tool;
          const out = await play(
            [node.tool],
            { kind: 'leaf', step, tool: node.tool, branch: stack.at(-1)!.name },
            `Step "${step}" (branch ${stack.at(-1)!.name}): call ${node.tool}.`,
          );
          return out.kind === 'called' && foundAnomaly(node.tool, out.call.observation, rf.log_ratio);
        },
        async confidence(after, _node, stack) {
          const leaves = allLeaves(stack);
          const out = await play(
            ['report_confidence'],
            { kind: 'confidence', after, leaves },
            `The ${after === 'selector' ? 'selector step' : 'branch'} ended. Report your confidence with report_confidence.`,
          );
          return out.kind === 'called' && out.call.observation.ok ? (out.call.observation.data as { confidence: number }).confidence : 0;
        },
        async replan(stack) {
          const out = await play(
            EXPLORE,
            { kind: 'replan', leaves: allLeaves(stack) },
            `Confidence is at most ${rf.theta}: re-plan with one more step of your choice.`,
          );
          return out.kind === 'called' && foundAnomaly(out.call.name, out.call.observation, rf.log_ratio);
        },
        alive,
      },
      { theta: rf.theta },
    );
    await interpreter.run();
    if (failed) return session.finish('rcaflow', 'policy_error', null);
    session.environment = { kind: 'final', leaves: allLeaves(interpreter.stack) } satisfies RcaFlowRequest;
    session.say(
      'user',
      'The workflow is done. Answer with print_results: the root causes with component, reason (fault type) and occurrence time, most likely first.',
    );
    const out = await session.turn(['print_results'], true);
    if (out.kind === 'policy_error') return session.finish('rcaflow', 'policy_error', null);
    return out.kind === 'answered' ? session.finish('rcaflow', 'answered', out.answer) : session.finish('rcaflow', 'no_answer', null);
  },
});
