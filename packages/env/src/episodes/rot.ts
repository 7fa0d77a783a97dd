/**
 * `rot`: ThinkFL Algorithm 1 (recursion of thought). Up to D_max tool turns with every tool
 * offered; an episode ends early on a valid print_results. After D_max turns one forced turn
 * offers only print_results.
 */
import type { RootCause } from '../types';
import { casePrompt, FORCE_ANSWER, systemPrompt, turnsLeft } from './prompts';
import { registerProtocol } from './registry';

registerProtocol({
  name: 'rot',
  async play(session, settings) {
    const { toolbox } = session;
    const budget = `You have at most ${settings.d_max} tool calls; then you must answer.`;
    session.say('system', systemPrompt(toolbox.specs(settings.tools), budget));
    session.say('user', casePrompt(toolbox.ctx.dataset, session.kase, toolbox));
    for (let t = 0; t < settings.d_max; t++) {
      const out = await session.turn(settings.tools, false);
      if (out.kind === 'answered') return session.finish('rot', 'answered', out.answer);
      if (out.kind === 'policy_error') return session.finish('rot', 'policy_error', null);
      const left = settings.d_max - t - 1;
      if (settings.turns_left_note && left > 0) session.noteOnLast(turnsLeft(left));
    }
    session.say('user', FORCE_ANSWER);
    const out = await session.turn(['print_results'], true);
    const answer: RootCause[] | null = out.kind === 'answered' ? out.answer : null;
    if (out.kind === 'policy_error') return session.finish('rot', 'policy_error', null);
    return session.finish('rot', answer ? 'forced_answer' : 'no_answer', answer);
  },
});
