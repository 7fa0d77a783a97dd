import { describe, expect, it } from 'vitest';
import type { ChatMessage, EpisodeRecord, RootCause } from '@thinkfl/env';
import {
  fBeta,
  hasTagOnce,
  oraclFBeta,
  oraclFnPenalty,
  oraclLength,
  oraclPodMatch,
  oraclTagFormat,
  oraclTpBonus,
  parseGraderSettings,
  type GraderSettingsInput,
} from '../src/index';
import { ctxFor, episode, POD, SERVICE_TRUTH } from './fixtures/episodes';

const grade = (g: { grade: typeof oraclPodMatch.grade }, ep: EpisodeRecord, s?: GraderSettingsInput) =>
  Promise.resolve(g.grade(ep, ctxFor(undefined, s)));

describe('ORACL set graders (Eq. 5, 6-8, 9, 10), default settings', () => {
  const table: {
    name: string;
    answer: RootCause[] | null;
    podMatch: number;
    f: number;
    tp: number;
    fn: number;
  }[] = [
    // TP 1, FP 0, FN 0: P = R = 1, F1 = 1; bonus 0.5*1; penalty 0
    { name: 'exactly the true pod', answer: [{ pod: POD.contacts }], podMatch: 1, f: 1, tp: 0.5, fn: 0 },
    // Duplicates collapse to one predicted cause.
    { name: 'true pod twice', answer: [{ pod: POD.contacts }, { pod: POD.contacts.toUpperCase() }], podMatch: 1, f: 1, tp: 0.5, fn: 0 },
    // TP 1, FP 1: P = 1/2, R = 1, F1 = 2*(1/2)/(3/2) = 2/3
    { name: 'true pod and one other', answer: [{ pod: POD.order }, { pod: POD.contacts }], podMatch: 0, f: 2 / 3, tp: 0.5, fn: 0 },
    // TP 1, FP 3: P = 1/4, R = 1, F1 = 2*(1/4)/(5/4) = 0.4
    { name: 'true pod among four', answer: [{ pod: POD.order }, { pod: POD.route }, { pod: POD.travel }, { pod: POD.contacts }], podMatch: 0, f: 0.4, tp: 0.5, fn: 0 },
    // TP 0, FN 1: F = 0, penalty -0.5
    { name: 'only wrong pods', answer: [{ pod: POD.order }], podMatch: 0, f: 0, tp: 0, fn: -0.5 },
    // Items naming no pod are no prediction at pod level: TP 1, FP 0
    { name: 'service-only item beside the true pod', answer: [{ service: 'ts-order-service' }, { pod: POD.contacts }], podMatch: 1, f: 1, tp: 0.5, fn: 0 },
    { name: 'empty answer', answer: [], podMatch: 0, f: 0, tp: 0, fn: -0.5 },
    { name: 'no answer', answer: null, podMatch: 0, f: 0, tp: 0, fn: -0.5 },
  ];
  it.each(table)('$name', async ({ answer, podMatch, f, tp, fn }) => {
    const ep = episode({ answer });
    expect((await grade(oraclPodMatch, ep)).score).toBe(podMatch);
    expect((await grade(oraclFBeta, ep)).score).toBeCloseTo(f, 12);
    expect((await grade(oraclTpBonus, ep)).score).toBe(tp);
    expect((await grade(oraclFnPenalty, ep)).score).toBe(fn);
  });

  it('F-beta weighs recall by beta', () => {
    // TP 1, FP 1, FN 0: P = 1/2, R = 1. beta 2: 5*(1/2)/(4*(1/2) + 1) = 2.5/3
    expect(fBeta({ predicted: 2, truePositives: 1, falsePositives: 1, falseNegatives: 0 }, 2).f).toBeCloseTo(2.5 / 3, 12);
    // beta 0.5: 1.25*(1/2)/(0.25*(1/2) + 1) = 0.625/1.125
    expect(fBeta({ predicted: 2, truePositives: 1, falsePositives: 1, falseNegatives: 0 }, 0.5).f).toBeCloseTo(0.625 / 1.125, 12);
  });

  it('matches at service level through pods', async () => {
    // Two pods of one service plus the true service's pod: predicted {order, contacts}: F1 = 2/3
    const ep = episode({ answer: [{ pod: POD.order }, { service: 'ts-order-service' }, { pod: POD.contacts }] });
    const r = await oraclFBeta.grade(ep, ctxFor(SERVICE_TRUTH));
    expect(r.score).toBeCloseTo(2 / 3, 12);
  });

  it('uses the configured bonus and penalty', async () => {
    const s = { oracl: { tpBonus: 2, fnPenalty: 3 } };
    expect((await grade(oraclTpBonus, episode({ answer: [{ pod: POD.contacts }] }), s)).score).toBe(2);
    expect((await grade(oraclFnPenalty, episode({ answer: [{ pod: POD.order }] }), s)).score).toBe(-3);
  });
});

const say = (content: string): ChatMessage => ({ role: 'assistant', content });

describe('ORACL tag-format penalty (Eq. 11)', () => {
  const table: { name: string; final: string; answer: RootCause[] | null; tags: string[]; score: number }[] = [
    { name: 'answer parsed, no tags required', final: 'anything', answer: [{ pod: POD.contacts }], tags: [], score: 0 },
    { name: 'no parsed answer', final: '<think>x</think>', answer: null, tags: [], score: -0.5 },
    { name: 'required tags present once', final: '<think>slow child</think><tool_call>{}</tool_call>', answer: [{ pod: POD.order }], tags: ['think', 'tool_call'], score: 0 },
    { name: 'tag missing', final: '<tool_call>{}</tool_call>', answer: [{ pod: POD.order }], tags: ['think', 'tool_call'], score: -0.5 },
    { name: 'tag twice', final: '<think>a</think><think>b</think>', answer: [{ pod: POD.order }], tags: ['think'], score: -0.5 },
    { name: 'tag unclosed', final: '<think>a', answer: [{ pod: POD.order }], tags: ['think'], score: -0.5 },
    { name: 'tags reversed', final: '</think>a<think>', answer: [{ pod: POD.order }], tags: ['think'], score: -0.5 },
  ];
  it.each(table)('$name', async ({ final, answer, tags, score }) => {
    const ep = episode({ answer, messages: [{ role: 'user', content: '<think>' }, say('<think>early</think>'), say(final)] });
    expect((await grade(oraclTagFormat, ep, { oracl: { tags } })).score).toBe(score);
  });

  it('hasTagOnce', () => {
    expect([hasTagOnce('<a>x</a>', 'a'), hasTagOnce('<a>x</a><a>', 'a'), hasTagOnce('', 'a')]).toEqual([true, false, false]);
  });
});

describe('ORACL length penalty (Eq. 11), correct answers only', () => {
  const s = { oracl: { targetChars: 100, maxChars: 300, lengthPenalty: 0.5 } };
  const table: { name: string; chars: number; answer: RootCause[]; score: number }[] = [
    { name: 'short and correct', chars: 80, answer: [{ pod: POD.contacts }], score: 0 },
    { name: 'at the target', chars: 100, answer: [{ pod: POD.contacts }], score: 0 },
    // (200 - 100)/(300 - 100) = 0.5 -> -0.5*0.5
    { name: 'half-way', chars: 200, answer: [{ pod: POD.contacts }], score: -0.25 },
    { name: 'beyond the maximum', chars: 1000, answer: [{ pod: POD.contacts }], score: -0.5 },
    { name: 'long but wrong', chars: 1000, answer: [{ pod: POD.order }], score: 0 },
  ];
  it.each(table)('$name', async ({ chars, answer, score }) => {
    // Assistant text split over a plain message and a native tool call's arguments; user text does not count.
    const half = Math.floor(chars / 2);
    const messages: ChatMessage[] = [
      { role: 'user', content: 'u'.repeat(500) },
      say('a'.repeat(half)),
      { role: 'assistant', content: '', tool_calls: [{ id: '1', type: 'function', function: { name: 'print_results', arguments: 'b'.repeat(chars - half) } }] },
    ];
    const r = await grade(oraclLength, episode({ answer, messages }), s);
    expect(r.score).toBeCloseTo(score, 12);
    expect(r.parts.chars).toBe(chars);
  });

  it('refuses maxChars not above targetChars, naming the path', () => {
    expect(() => parseGraderSettings({ oracl: { targetChars: 10, maxChars: 10 } })).toThrow(/graders\.oracl\.maxChars: maxChars must exceed targetChars/);
  });
});
