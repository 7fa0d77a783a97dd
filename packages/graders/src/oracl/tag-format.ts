/**
 * ORACL tag-format penalty (Eq. 11): negative when the episode gave no parsed answer, or
 * its final assistant message does not hold each configured tag exactly once, well formed.
 */
import type { EpisodeRecord } from '@thinkfl/env';
import type { Grader } from '../types';

function count(text: string, needle: string): number {
  return text.split(needle).length - 1;
}

/** True when the text holds exactly one <tag> and one </tag>, in that order. */
export function hasTagOnce(text: string, tag: string): boolean {
  const open = `<${tag}>`;
  const close = `</${tag}>`;
  return count(text, open) === 1 && count(text, close) === 1 && text.indexOf(open) < text.indexOf(close);
}

function finalAssistantText(episode: EpisodeRecord): string {
  for (let i = episode.messages.length - 1; i >= 0; i--) {
    if (episode.messages[i].role === 'assistant') return episode.messages[i].content ?? '';
  }
  return '';
}

export const oraclTagFormat: Grader = {
  name: 'oracl_tag_format',
  description: 'ORACL Eq. 11: -tagPenalty unless the answer parsed and the final message holds every tag once',
  grade(episode, ctx) {
    const { tags, tagPenalty } = ctx.settings.oracl;
    const text = finalAssistantText(episode);
    const tagsOk = tags.filter((t) => hasTagOnce(text, t)).length;
    const ok = episode.answer !== null && tagsOk === tags.length;
    return { score: ok ? 0 : -tagPenalty, parts: { answered: episode.answer === null ? 0 : 1, tagsOk } };
  },
};
