/**
 * Teacher answers named by span (stages.priming.sft.answer_spans) on real Nezha cases: the same
 * conversations as the expert's own, except that each root cause of the answer is a span alias
 * shown earlier, which print_results resolves to the service and pod the expert named.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { loadDataset, spreadCases, type Case, type Dataset } from '@thinkfl/env';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { splitCases } from '../src/sft/index';
import { teacherEpisodes, type TeacherData } from '@thinkfl/env';

const episode = { d_max: 4, tool_settings: { span_aliases: true, verdicts: true } };
const expert = { max_answers: 3, log_survey: 0, lead_checks: 0, confirmations: 0, log_checks: 0 };
let dataset: Dataset;
let cases: Case[];
let byName: TeacherData;
let bySpan: TeacherData;
let atRandom: TeacherData;

beforeAll(async () => {
  dataset = await loadDataset(await ensureNezhaDataset());
  cases = spreadCases(splitCases(dataset.cases, { by: 'fault', eval_fraction: 0.3 }, 0).train, 60);
  byName = await teacherEpisodes({ dataset, cases, episode, expert, reasoning: false });
  bySpan = await teacherEpisodes({ dataset, cases, episode, expert, reasoning: false, answerSpans: 'teacher' });
  atRandom = await teacherEpisodes({ dataset, cases, episode, expert, reasoning: false, answerSpans: 'random' });
}, 120_000);

const lastCall = (content: string) =>
  JSON.parse(/<tool_call>\n([\s\S]*)\n<\/tool_call>/.exec(content)![1]) as {
    name: string;
    arguments: { root_causes: Record<string, unknown>[] };
  };

describe('teacher answers by span', () => {
  it('keeps the same correct conversations, answers by span alias, and resolves to the names the expert gave', () => {
    expect(byName.correct).toBeGreaterThan(3);
    expect(bySpan.played).toBe(byName.played);
    expect(bySpan.correct).toBe(byName.correct);
    for (const [i, ep] of bySpan.episodes.entries()) {
      const named = byName.episodes[i];
      expect(ep.case.id).toBe(named.case.id);
      const msgs = ep.record.messages.filter((m) => m.role === 'assistant');
      const given = lastCall(msgs[msgs.length - 1].content);
      expect(given.name).toBe('print_results');
      for (const r of given.arguments.root_causes) {
        expect(Object.keys(r)).toEqual(['span']);
        expect(r.span).toMatch(/^s\d+$/);
      }
      // The expert's own answer by name is the reference: same ranking at service and pod level.
      expect(ep.record.answer!.map((r) => [r.service, r.pod])).toEqual(named.record.answer!.map((r) => [r.service, r.pod]));
      // Each alias was shown in a search_traces result before the answer.
      const shown = ep.record.messages
        .filter((m) => m.role === 'tool')
        .map((m) => m.content)
        .join('\n');
      for (const r of given.arguments.root_causes) expect(shown).toMatch(new RegExp(`(^|\\n)(- |Span )${r.span} `));
    }
  });

  it('names the most abnormal span of the pod, by the verdicts search_traces states', () => {
    const rank = ['error', 'missing', 'slow', 'short', 'usual'];
    for (const ep of bySpan.episodes) {
      const msgs = ep.record.messages.filter((m) => m.role === 'assistant');
      const first = lastCall(msgs[msgs.length - 1].content).arguments.root_causes[0].span as string;
      const text = ep.record.messages
        .filter((m) => m.role === 'tool')
        .map((m) => m.content)
        .join('\n');
      const lines = [...text.matchAll(/(?:^|\n)(?:- |Span )(s\d+) (\S+) \S+ pod=(\S+) /g)].map((m) => ({
        ref: m[1],
        verdict: m[2],
        pod: m[3],
      }));
      const chosen = lines.find((l) => l.ref === first)!;
      const samePod = lines.filter((l) => l.pod === chosen.pod);
      expect(Math.min(...samePod.map((l) => rank.indexOf(l.verdict)))).toBe(rank.indexOf(chosen.verdict));
    }
  });
});

describe('teacher answers by span under pod aliases', () => {
  it('answers the same spans when the expert names pods by their aliases', async () => {
    const aliased = await teacherEpisodes({
      dataset,
      cases,
      episode: { ...episode, tool_settings: { ...episode.tool_settings, pod_aliases: true } },
      expert,
      reasoning: false,
      answerSpans: 'teacher',
    });
    expect(aliased.correct).toBe(bySpan.correct);
    expect(aliased.episodes.map((e) => e.record.answer)).toEqual(bySpan.episodes.map((e) => e.record.answer));
    const answers = (d: TeacherData) =>
      d.episodes.map((e) => lastCall(e.record.messages.filter((m) => m.role === 'assistant').at(-1)!.content));
    expect(answers(aliased)).toEqual(answers(bySpan));
  }, 120_000);
});

describe('teacher answers drawn at random (answer_choice: random)', () => {
  /** The span aliases the last search_traces result listed (its parent line and child lines). */
  const lastResultSpans = (ep: TeacherData['episodes'][number]) => {
    const results = ep.record.messages.filter((m) => m.role === 'tool' && /(^|\n)(- |Span )s\d+ /.test(m.content));
    return new Set([...results[results.length - 1].content.matchAll(/(?:^|\n)(?:- |Span )(s\d+) /g)].map((m) => m[1]));
  };

  const answerOf = (ep: TeacherData['episodes'][number]) => {
    const msgs = ep.record.messages.filter((m) => m.role === 'assistant');
    return lastCall(msgs[msgs.length - 1].content).arguments.root_causes.map((r) => r.span as string);
  };
  const callsOf = (ep: TeacherData['episodes'][number]) =>
    ep.record.messages
      .filter((m) => m.role === 'assistant')
      .slice(0, -1)
      .map((m) => m.content);

  it('keeps every conversation, right or wrong, with the expert walk and at most its number of answers', () => {
    expect(atRandom.played).toBe(byName.played);
    expect(atRandom.episodes).toHaveLength(atRandom.played);
    expect(atRandom.correct).toBeLessThan(atRandom.played);
    // Without detours the walk is the expert's: the calls before the answer match its kept conversations.
    const teacher = new Map(bySpan.episodes.map((ep) => [ep.case.id, ep]));
    let compared = 0;
    for (const ep of atRandom.episodes) {
      const other = teacher.get(ep.case.id);
      if (!other) continue;
      expect(callsOf(ep)).toEqual(callsOf(other));
      expect(answerOf(ep).length).toBeLessThanOrEqual(answerOf(other).length);
      compared++;
    }
    expect(compared).toBeGreaterThan(3);
  });

  it("answers distinct spans of the last search_traces result, often not the teacher's", () => {
    const teacher = new Map(bySpan.episodes.map((ep) => [ep.case.id, answerOf(ep)[0]]));
    let differs = 0;
    let compared = 0;
    for (const ep of atRandom.episodes) {
      const spans = answerOf(ep);
      const shown = lastResultSpans(ep);
      expect(spans.length).toBeGreaterThan(0);
      expect(new Set(spans).size).toBe(spans.length);
      for (const s of spans) expect(shown.has(s)).toBe(true);
      const first = teacher.get(ep.case.id);
      if (first === undefined) continue;
      compared++;
      if (spans[0] !== first) differs++;
    }
    expect(differs).toBeGreaterThan(compared / 4);
  });
});
