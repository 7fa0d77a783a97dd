/** Format grader: the share of assistant turns that made a well-formed call of an offered tool. */
import type { EpisodeRecord } from '@thinkfl/env';
import { namesAnything } from '../match';
import type { Grader } from '../types';

/**
 * The turn that delivered the answer: the last call of the answer tool, or, when the
 * answer came some other way (e.g. a forced final turn recorded without a call), the last turn.
 */
function answerTurn(episode: EpisodeRecord, answerTool: string): number | undefined {
  for (let i = episode.tool_calls.length - 1; i >= 0; i--) {
    if (episode.tool_calls[i].name === answerTool) return episode.tool_calls[i].turn;
  }
  return episode.turns.at(-1)?.turn;
}

export const format: Grader = {
  name: 'format',
  description: 'share of assistant turns whose call parses, names an offered tool and has valid arguments',
  grade(episode, ctx) {
    const turns = episode.turns.length;
    // An empty answer, or an item naming no node/service/pod, makes the answer turn invalid.
    const answer = episode.answer;
    const answerOk = answer === null || (answer.length > 0 && answer.every(namesAnything));
    const badTurn = answerOk ? undefined : answerTurn(episode, ctx.settings.answer_tool);
    const valid = episode.turns.filter((t) => t.parsed && t.offered_tool && t.args_valid && t.turn !== badTurn).length;
    return {
      // No assistant turn at all produced nothing well-formed.
      score: turns === 0 ? 0 : valid / turns,
      parts: { turns, validTurns: valid, answerInvalid: answerOk ? 0 : 1 },
    };
  },
};
