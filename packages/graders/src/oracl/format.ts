/**
 * ORACL format compliance (Eq. 9): R_format = -C_invalid / C_total over the final generation.
 * Four checks per configured tag: its pair appears exactly once; the open tag comes before the
 * close tag; the content is not blank; the pair is neither nested in nor crossing another
 * tag's pair. A tag that is absent fails all four.
 */
import type { EpisodeRecord } from '@thinkfl/env';
import type { Grader } from '../types';

export const CHECKS_PER_TAG = 4;

interface Span {
  tag: string;
  open: number;
  close: number;
}

function occurrences(text: string, needle: string): number[] {
  const out: number[] = [];
  for (let i = text.indexOf(needle); i >= 0; i = text.indexOf(needle, i + 1)) out.push(i);
  return out;
}

/** Failed checks of each tag in the text. */
export function tagChecks(text: string, tags: readonly string[]): { invalid: number; total: number } {
  const spans: (Span | undefined)[] = tags.map((tag) => {
    const opens = occurrences(text, `<${tag}>`);
    const closes = occurrences(text, `</${tag}>`);
    return opens.length === 1 && closes.length === 1 ? { tag, open: opens[0], close: closes[0] } : undefined;
  });
  let invalid = 0;
  spans.forEach((s, i) => {
    if (!s) {
      invalid += CHECKS_PER_TAG;
      return;
    }
    const ordered = s.open < s.close;
    if (!ordered) invalid++;
    const content = ordered ? text.slice(s.open + s.tag.length + 2, s.close) : '';
    if (!content.trim()) invalid++;
    const lo = Math.min(s.open, s.close);
    const hi = Math.max(s.open, s.close);
    // Another tag's open or close mark inside this pair, or this pair inside another's: nesting or crossing.
    const tangled = spans.some((o, j) => {
      if (!o || j === i) return false;
      const inside = (x: number) => x > lo && x < hi;
      const around = (x: number) => x > Math.min(o.open, o.close) && x < Math.max(o.open, o.close);
      return inside(o.open) || inside(o.close) || around(s.open) || around(s.close);
    });
    if (tangled) invalid++;
  });
  // The pair-present check of a present tag always passes; it is counted in total.
  return { invalid, total: CHECKS_PER_TAG * tags.length };
}

/** The policy's last generation (the single turn of `oracl`). */
export function finalGeneration(episode: EpisodeRecord): string {
  for (let i = episode.messages.length - 1; i >= 0; i--) {
    const m = episode.messages[i];
    if (m.role === 'assistant') return m.content ?? '';
  }
  return '';
}

export const oraclTagFormat: Grader = {
  name: 'oracl_tag_format',
  description: 'ORACL Eq. 9: -C_invalid/C_total over 4 checks per tag (once, ordered, non-empty, not nested) in the final generation',
  grade(episode, ctx) {
    const { invalid, total } = tagChecks(finalGeneration(episode), ctx.settings.oracl.tags);
    return { score: 0 - invalid / total, parts: { invalid, total } };
  },
};
