/**
 * `rclagent`: RCLAgent's three phases. (1) Initial reasoning without the metrics tool, ending
 * with a first hypothesis. (2) Critical reflection: print_results is withheld until the model
 * makes a new successful exploration call (it must go deeper). (3) Final review offering only
 * print_results; its answer is the episode's answer.
 */
import type { RootCause } from '../types';
import { casePrompt, RCL_FINAL, RCL_INITIAL, rclReflection, systemPrompt } from './prompts';
import { registerProtocol } from './registry';

const METRICS_TOOL = 'search_fluctuating_metrics';

function hypothesisText(answer: RootCause[] | undefined): string {
  if (!answer) return 'not stated yet';
  return answer
    .slice(0, 3)
    .map((r) => r.pod ?? r.service ?? r.node)
    .join(', ');
}

registerProtocol({
  name: 'rclagent',
  async play(session, settings) {
    const { toolbox } = session;
    const { initialTurns, reflectionTurns } = settings.rclagent;
    const initialTools = settings.tools.filter((t) => t !== METRICS_TOOL);
    const budget = `You work in three phases with at most ${initialTurns} and ${reflectionTurns} tool calls, then a final answer.`;
    session.say('system', systemPrompt(toolbox.specs(settings.tools), budget));
    session.say('user', `${casePrompt(toolbox.ctx.dataset, session.kase, toolbox)}\n\n${RCL_INITIAL}`);

    let hypothesis: RootCause[] | undefined;
    for (let t = 0; t < initialTurns && !hypothesis; t++) {
      const out = await session.turn(initialTools, false);
      if (out.kind === 'policy_error') return session.finish('rclagent', 'policy_error', null);
      if (out.kind === 'answered') hypothesis = out.answer;
    }

    session.say('user', rclReflection(hypothesisText(hypothesis)));
    const exploring = settings.tools.filter((t) => t !== 'print_results');
    let deeper = false;
    for (let t = 0; t < reflectionTurns; t++) {
      const out = await session.turn(deeper ? settings.tools : exploring, false);
      if (out.kind === 'policy_error') return session.finish('rclagent', 'policy_error', null);
      if (out.kind === 'answered') break;
      if (out.kind === 'called' && out.newStep) deeper = true;
    }

    session.say('user', RCL_FINAL);
    const out = await session.turn(['print_results'], true);
    if (out.kind === 'policy_error') return session.finish('rclagent', 'policy_error', null);
    return out.kind === 'answered'
      ? session.finish('rclagent', 'answered', out.answer)
      : session.finish('rclagent', 'no_answer', null);
  },
});
