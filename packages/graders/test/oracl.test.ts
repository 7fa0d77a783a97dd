import { describe, expect, it } from 'vitest';
import type { ChatMessage, EpisodeRecord, RootCause } from '@thinkfl/env';
import {
  gradeGroup,
  lengthScore,
  oraclFBeta,
  oraclFnPenalty,
  oraclLength,
  oraclPodMatch,
  oraclResult,
  oraclTagFormat,
  oraclTpBonus,
  parseComposite,
  parseGraderSettings,
  tagChecks,
  type GradeContext,
  type Grader,
  type GraderSettingsInput,
} from '../src/index';
import { ctxFor, episode, POD, SERVICE_TRUTH } from './fixtures/episodes';

const typed = (t: string | undefined, s?: GraderSettingsInput): GradeContext => ({ ...ctxFor(undefined, s), faultType: t });
const score = async (g: Grader, ep: EpisodeRecord, ctx: GradeContext) => (await g.grade(ep, ctx)).score;
const EPS = 1e-6;

describe('ORACL Eq. 5-8 with the default settings (beta 2, alpha 0.1, delta 0.5, d 0.5, tau_fn 0)', () => {
  // The truth: pod ts-contacts-service, type "exception".
  const table: { name: string; answer: RootCause[] | null; sPod: number; f: number; tp: number; fn: number }[] = [
    // POD 1/0; pairs TP 1 FP 0 FN 0: F = 5/(5+eps)
    {
      name: 'true pod, true type',
      answer: [{ pod: POD.contacts, type: 'exception' }],
      sPod: 1 / (1 + EPS),
      f: 5 / (5 + EPS),
      tp: 1,
      fn: 0,
    },
    // type compared without case and separators
    {
      name: 'true pod, type spelled differently',
      answer: [{ pod: POD.contacts, type: ' Exception ' }],
      sPod: 1 / (1 + EPS),
      f: 5 / (5 + EPS),
      tp: 1,
      fn: 0,
    },
    // POD 1/0 (type ignored); pairs TP 0 FP 1 FN 1: F = 0; penalty 0.5*max(0, 1-0)
    { name: 'true pod, wrong type', answer: [{ pod: POD.contacts, type: 'cpu_contention' }], sPod: 1 / (1 + EPS), f: 0, tp: 0, fn: -0.5 },
    // POD 1/1: 1/(2+eps); pairs TP 1 FP 1 FN 0: F = 5/(5+1+eps)
    {
      name: 'true pair and one other pod',
      answer: [
        { pod: POD.order, type: 'exception' },
        { pod: POD.contacts, type: 'exception' },
      ],
      sPod: 1 / (2 + EPS),
      f: 5 / (6 + EPS),
      tp: 1,
      fn: 0,
    },
    // same pod twice with two types: POD 1/0; pairs TP 1, FP 1: F = 5/6
    {
      name: 'true pod with two types',
      answer: [
        { pod: POD.contacts, type: 'return' },
        { pod: POD.contacts, type: 'exception' },
      ],
      sPod: 1 / (1 + EPS),
      f: 5 / (6 + EPS),
      tp: 1,
      fn: 0,
    },
    // POD 0/2: 0; pairs TP 0, FP 2, FN 1: 0
    { name: 'only wrong pods', answer: [{ pod: POD.order, type: 'exception' }, { pod: POD.route }], sPod: 0, f: 0, tp: 0, fn: -0.5 },
    { name: 'no answer', answer: null, sPod: 0, f: 0, tp: 0, fn: -0.5 },
  ];
  it.each(table)('$name', async ({ answer, sPod, f, tp, fn }) => {
    const ep = episode({ answer });
    const ctx = typed('exception');
    expect(await score(oraclPodMatch, ep, ctx)).toBeCloseTo(sPod, 12);
    expect(await score(oraclFBeta, ep, ctx)).toBeCloseTo(f, 12);
    expect(await score(oraclTpBonus, ep, ctx)).toBe(tp);
    expect(await score(oraclFnPenalty, ep, ctx)).toBe(fn);
    // Eq. 7-8: 0.1 S_pod + 0.9 F + 0.5 1[TP>0] + fn
    expect(await score(oraclResult, ep, ctx)).toBeCloseTo(0.1 * sPod + 0.9 * f + 0.5 * tp + fn, 12);
  });

  it('beta > 1 weighs a miss above a false alarm', async () => {
    // beta 3: TP 1, FP 2: 10/(10 + 2 + eps)
    const ep = episode({
      answer: [
        { pod: POD.order, type: 'x' },
        { pod: POD.route, type: 'x' },
        { pod: POD.contacts, type: 'exception' },
      ],
    });
    expect(await score(oraclFBeta, ep, typed('exception', { oracl: { beta: 3 } }))).toBeCloseTo(10 / (12 + EPS), 12);
    expect(() => parseGraderSettings({ oracl: { beta: 1 } })).toThrow(/graders\.oracl\.beta/);
  });

  it('the false-negative tolerance lifts the penalty (Eq. 8)', async () => {
    const ep = episode({ answer: [{ pod: POD.order }] });
    expect(await score(oraclFnPenalty, ep, typed('exception', { oracl: { fn_tolerance: 1 } }))).toBe(0);
    expect(await score(oraclFnPenalty, ep, typed('exception', { oracl: { fn_weight: 2 } }))).toBe(-2);
    // 0.1*0 + 0.9*0 + 0 - 2
    expect(await score(oraclResult, ep, typed('exception', { oracl: { fn_weight: 2 } }))).toBe(-2);
  });

  it('without a known true type, pairs match on the component', async () => {
    const r = await oraclFBeta.grade(episode({ answer: [{ pod: POD.contacts, type: 'anything' }] }), typed(undefined));
    expect(r.score).toBeCloseTo(5 / (5 + EPS), 12);
    expect(r.parts.typeKnown).toBe(0);
  });

  it('matches at service level through pods', async () => {
    // predicted services {order, contacts}: POD 1/1, pairs TP 1 FP 1 (types ignored without a known type)
    const ep = episode({ answer: [{ pod: POD.order }, { service: 'ts-order-service' }, { pod: POD.contacts }] });
    const r = await oraclPodMatch.grade(ep, { ...ctxFor(SERVICE_TRUTH) });
    expect(r.score).toBeCloseTo(1 / (2 + EPS), 12);
  });
});

const say = (content: string): ChatMessage => ({ role: 'assistant', content });

describe('ORACL Eq. 9 format: -C_invalid/C_total, 4 checks per tag', () => {
  const two = ['think', 'root'];
  const table: { name: string; text: string; invalid: number }[] = [
    { name: 'both well formed', text: '<think>a</think>\n<root>x</root>', invalid: 0 },
    // root: content blank (1)
    { name: 'empty root', text: '<think>a</think><root> </root>', invalid: 1 },
    // root absent: 4
    { name: 'root missing', text: '<think>a</think>', invalid: 4 },
    // think twice: pair not once -> 4
    { name: 'think twice', text: '<think>a</think><think>b</think><root>x</root>', invalid: 4 },
    // root reversed: order (1) and content (1)
    { name: 'root reversed', text: '<think>a</think></root>x<root>', invalid: 2 },
    // root nested in think: think tangled (1), root tangled (1)
    { name: 'root nested in think', text: '<think>a<root>x</root></think>', invalid: 2 },
    // crossing: think tangled, root tangled
    { name: 'crossing pairs', text: '<think>a<root>b</think>c</root>', invalid: 2 },
  ];
  it.each(table)('$name', async ({ text, invalid }) => {
    expect(tagChecks(text, two)).toEqual({ invalid, total: 8 });
    const ep = episode({ messages: [say('<think>earlier</think>'), say(text)] });
    expect(await score(oraclTagFormat, ep, ctxFor(undefined, { oracl: { tags: two } }))).toBeCloseTo(-invalid / 8, 12);
  });

  it('defaults to the tags think, Fault, Counterfactual, root', async () => {
    const ok = '<think>a</think><Fault>b</Fault><Counterfactual>c</Counterfactual><root>d</root>';
    expect(await score(oraclTagFormat, episode({ messages: [say(ok)] }), ctxFor())).toBe(0);
    // Only think present: 3 tags x 4 = 12 of 16
    expect(await score(oraclTagFormat, episode({ messages: [say('<think>a</think>')] }), ctxFor())).toBe(-0.75);
  });
});

describe('ORACL Eq. 10-11 length: correct * s(L) on the final generation', () => {
  it('s(L) is 0 up to L_min, linear to -1 at L_max', () => {
    expect([
      lengthScore(100, 100, 300),
      lengthScore(200, 100, 300),
      lengthScore(250, 100, 300),
      lengthScore(300, 100, 300),
      lengthScore(900, 100, 300),
    ]).toEqual([0, -0.5, -0.75, -1, -1]);
  });

  const s = { oracl: { length_min: 100, length_max: 300 } };
  const table: { name: string; chars: number; answer: RootCause[]; score: number }[] = [
    { name: 'short and correct', chars: 80, answer: [{ pod: POD.contacts, type: 'exception' }], score: 0 },
    // (200 - 100)/(300 - 100) = 0.5
    { name: 'half-way and correct', chars: 200, answer: [{ pod: POD.contacts, type: 'exception' }], score: -0.5 },
    { name: 'beyond L_max and correct', chars: 1000, answer: [{ pod: POD.contacts, type: 'exception' }], score: -1 },
    { name: 'long but wrong type', chars: 1000, answer: [{ pod: POD.contacts, type: 'return' }], score: 0 },
  ];
  it.each(table)('$name', async ({ chars, answer, score: want }) => {
    // Only the final generation counts: an earlier long message does not.
    const ep = episode({ answer, messages: [say('e'.repeat(5000)), { role: 'user', content: 'u'.repeat(500) }, say('a'.repeat(chars))] });
    const r = await oraclLength.grade(ep, typed('exception', s));
    expect(r.score).toBeCloseTo(want, 12);
    expect(r.parts.chars).toBe(chars);
  });

  it('refuses length_max not above length_min, naming the path', () => {
    expect(() => parseGraderSettings({ oracl: { length_min: 10, length_max: 10 } })).toThrow(
      /graders\.oracl\.length_max: length_max must exceed length_min/,
    );
  });
});

describe('the oracl preset sums Eq. 8, 9 and 11', () => {
  it('grades a well-formed correct answer by hand', async () => {
    const text = '<think>a</think><Fault>b</Fault><Counterfactual>c</Counterfactual><root>d</root>';
    const ep = episode({ answer: [{ pod: POD.contacts, type: 'exception' }], messages: [say(text)] });
    const g = await gradeGroup(
      [ep],
      { truth: typed('exception').truth, d_max: 10, podToService: typed('x').podToService, faultType: 'exception' },
      parseComposite('oracl'),
    );
    // 0.1/(1+eps) + 0.9*5/(5+eps) + 0.5 + 0 (format) + 0 (short)
    expect(g.totals[0]).toBeCloseTo(0.1 / (1 + EPS) + (0.9 * 5) / (5 + EPS) + 0.5, 9);
  });
});
