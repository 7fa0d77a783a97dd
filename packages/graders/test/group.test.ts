import { describe, expect, it } from 'vitest';
import { parseEpisodeSettings, type EpisodeRecord } from '@thinkfl/env';
import { COMPOSITE_PRESETS, gradeGroup, MemoryDiversityCache, parseComposite, parseGraderSettings } from '../src/index';
import { call, episode, pathWithTruthAt, POD, POD_TRUTH, SERVICE_OF, turn } from './fixtures/episodes';

const SHOWN = [call(0, 'search_traces', [POD.contacts, POD.order]), call(3, 'print_results', [])];
const TURNS = [turn(0), turn(1), turn(2), turn(3)];

/** Four samples of one question, in sample order. */
const GROUP: EpisodeRecord[] = [
  // rank 0; path of 4 with the truth at step 2; all turns valid
  episode({ answer: [{ pod: POD.contacts }], path: pathWithTruthAt(4, [2]), tool_calls: SHOWN, turns: TURNS }),
  // rank 1; same path as sample 0; one turn not parsed
  episode({
    answer: [{ pod: POD.order }, { pod: POD.contacts }],
    path: pathWithTruthAt(4, [2]),
    tool_calls: SHOWN,
    turns: [turn(0), turn(1, { parsed: false }), turn(2), turn(3)],
  }),
  // no answer; path of 5 without the truth; last turn not parsed
  episode({
    answer: null,
    path: pathWithTruthAt(5, []),
    tool_calls: SHOWN.slice(0, 1),
    turns: [turn(0), turn(1), turn(2), turn(3, { parsed: false })],
    stop_reason: 'no_answer',
  }),
  // rank 0 with an invented second pod; path of 6 with the truth at step 3
  episode({
    answer: [{ pod: POD.contacts }, { pod: 'ts-invented-service-0-x' }],
    path: pathWithTruthAt(6, [3]),
    tool_calls: SHOWN,
    turns: TURNS,
  }),
];

describe('gradeGroup', () => {
  const base = { truth: POD_TRUTH, podToService: SERVICE_OF, d_max: 10 };

  it('stage 1: recall + format, per sample in order', async () => {
    const g = await gradeGroup(GROUP, base, 'stage1');
    // recall 1, 0.9, 0, 1; format 4/4, 3/4, 3/4, 4/4
    expect(g.totals.map((t) => +t.toFixed(12))).toEqual([2, 1.65, 0.75, 2]);
    expect(g.samples[1].graders.recall).toEqual({ score: 0.9, weight: 1, parts: { found: 1, rank: 1 } });
    expect(g.samples[2].graders.format.score).toBe(0.75);
  });

  it('stage 2: recall 1.0 + diversity 0.8, novelty in sample order and across steps', async () => {
    const cache = new MemoryDiversityCache();
    const g = await gradeGroup(GROUP, { ...base, diversity: cache }, 'stage2');
    // diversity: new+solved A=1; same path C=0; new unsolved B=0.3; new+solved A=1
    // totals: 1 + 0.8; 0.9 + 0; 0 + 0.24; 1 + 0.8
    expect(g.totals.map((t) => +t.toFixed(12))).toEqual([1.8, 0.9, 0.24, 1.8]);
    // The next step repeats the question: every path is known now, so diversity adds C = 0.
    const again = await gradeGroup(GROUP, { ...base, diversity: cache }, 'stage2');
    expect(again.totals.map((t) => +t.toFixed(12))).toEqual([1, 0.9, 0, 1]);
  });

  it('stage 2: a group graded again under its group id scores as the first time; another group finds the paths known', async () => {
    const cache = new MemoryDiversityCache();
    const first = await gradeGroup(GROUP, { ...base, diversity: cache, groupId: 'exploration-3-0' }, 'stage2');
    expect(first.totals.map((t) => +t.toFixed(12))).toEqual([1.8, 0.9, 0.24, 1.8]);
    // A replay after a kill: the cache already holds every path, first recorded by these very samples.
    const replay = await gradeGroup(GROUP, { ...base, diversity: cache, groupId: 'exploration-3-0' }, 'stage2');
    expect(replay.totals).toEqual(first.totals);
    expect(replay.samples.map((s) => s.graders.diversity.parts.new)).toEqual([1, 0, 1, 1]);
    const next = await gradeGroup(GROUP, { ...base, diversity: cache, groupId: 'exploration-4-0' }, 'stage2');
    expect(next.totals.map((t) => +t.toFixed(12))).toEqual([1, 0.9, 0, 1]);
  });

  it('stage 3: multi-factor', async () => {
    const g = await gradeGroup(GROUP, base, 'stage3');
    // 0: R 1, P min(2/2,1) = 1, H 0 -> 1.2
    // 1: R 0.9, P 1, H 0 -> 1.1
    // 2: R 0, P 5/10, H 0 -> 0.1
    // 3: R 1, P min(3/4,1) = 0.75, H 0.5*1/2 = 0.25 -> 1 + 0.15 - 0.05 = 1.1
    expect(g.totals.map((t) => +t.toFixed(12))).toEqual([1.2, 1.1, 0.1, 1.1]);
    expect(g.samples[3].graders.multi_factor.parts).toEqual({ R: 1, P: 0.75, H: 0.25 });
  });

  it('ORACL preset sums Eq. 8 (result), Eq. 9 (format) and Eq. 11 (length)', async () => {
    const g = await gradeGroup(GROUP, base, 'oracl');
    // No fault type given: pairs match on the pod. No assistant text: all 4 tags fail all 4 checks (-1); length 0.
    // 0: 0.1*1 + 0.9*1 + 0.5 - 0 - 1 = 0.5
    // 1: pods 1/1 -> 0.1*(1/2) + 0.9*(5/6) + 0.5 - 1 = 0.3
    // 2: 0 + 0 + 0 - 0.5 (one miss) - 1 = -1.5
    // 3: as 1 (the invented pod is one more wrong pod) = 0.3
    const want = [0.5, 0.3, -1.5, 0.3];
    g.totals.forEach((t, i) => expect(t).toBeCloseTo(want[i], 5));
    expect(Object.keys(g.samples[0].graders)).toEqual(['oracl_result', 'oracl_tag_format', 'oracl_length']);
  });

  it('takes an explicit composite with custom settings', async () => {
    const spec = {
      terms: [
        { grader: 'recall', weight: 2 },
        { grader: 'hallucination', weight: -1 },
      ],
    };
    const g = await gradeGroup(GROUP, { ...base, settings: { recall: { r_max: 5 } } }, spec);
    // 2*1 - 0; 2*(1 - 1/5) - 0; 2*0 - 0; 2*1 - 0.25
    expect(g.totals.map((t) => +t.toFixed(12))).toEqual([2, 1.6, 0, 1.75]);
    expect(Object.keys(g.samples[0].graders)).toEqual(['recall', 'hallucination']);
  });

  it('refuses a group mixing questions, unless the question id is given', async () => {
    const mixed = [GROUP[0], { ...GROUP[1], case_id: 'q2' }];
    await expect(gradeGroup(mixed, base, 'stage1')).rejects.toThrow(/case ids q1, q2/);
    const g = await gradeGroup(mixed, { ...base, questionId: 'q1' }, 'stage1');
    expect(g.totals).toHaveLength(2);
  });

  it('grades malformed answer items instead of crashing', async () => {
    // Items a lax parser might let through: not objects, or names that are not strings.
    const answer = [null, 42, { pod: 7 }, { service: ['x'] }, { pod: POD.contacts }] as unknown as EpisodeRecord['answer'];
    const messages = [{ role: 'assistant', content: null }] as unknown as EpisodeRecord['messages'];
    const ep = episode({ answer, messages, tool_calls: SHOWN, turns: TURNS });
    for (const preset of Object.keys(COMPOSITE_PRESETS)) {
      const g = await gradeGroup([ep], { ...base, diversity: new MemoryDiversityCache() }, preset);
      expect(Number.isFinite(g.totals[0])).toBe(true);
    }
    // The true pod is the first item naming a pod: recall 1. Four of five items name nothing
    // (invalid), and those four are one empty answer repeated (3 duplicates): 0.5*4/5 + 0.5*3/5.
    const g = await gradeGroup([ep], base, 'stage3');
    expect(g.samples[0].graders.multi_factor.parts.H).toBeCloseTo(0.7, 12);
    expect(g.samples[0].graders.multi_factor.parts.R).toBe(1);
  });

  it('an empty group grades to nothing', async () => {
    expect(await gradeGroup([], base, 'stage3')).toEqual({ totals: [], samples: [] });
  });
});

describe('composite and settings parsing', () => {
  it('presets are data over registered graders', () => {
    for (const [name, spec] of Object.entries(COMPOSITE_PRESETS)) expect(parseComposite(spec, name)).toEqual(spec);
    expect(parseComposite('stage2').terms).toEqual([
      { grader: 'recall', weight: 1 },
      { grader: 'diversity', weight: 0.8 },
    ]);
  });

  const bad: { name: string; input: unknown; error: RegExp }[] = [
    { name: 'unknown preset', input: 'stage9', error: /^stages\.0\.reward: unknown composite 'stage9'/ },
    {
      name: 'unknown grader',
      input: { terms: [{ grader: 'recal', weight: 1 }] },
      error: /stages\.0\.reward\.terms\.0\.grader: unknown grader 'recal'/,
    },
    { name: 'missing weight', input: { terms: [{ grader: 'recall' }] }, error: /stages\.0\.reward\.terms\.0\.weight/ },
    { name: 'no terms', input: { terms: [] }, error: /stages\.0\.reward\.terms: a composite needs at least one term/ },
    { name: 'stray key', input: { terms: [{ grader: 'recall', weight: 1, wieght: 2 }] }, error: /stages\.0\.reward\.terms\.0: .*wieght/ },
  ];
  it.each(bad)('composite: $name', ({ input, error }) => {
    expect(() => parseComposite(input, 'stages.0.reward')).toThrow(error);
  });

  it('settings: defaults are the papers', () => {
    const s = parseGraderSettings(undefined);
    expect([s.recall.r_max, s.recall.missing_score, s.route.mu]).toEqual([10, 0, 2]);
    // The route grader's D_max is the episode's (GradeContext.d_max), whose default is ThinkFL's 10.
    expect(parseEpisodeSettings({}).d_max).toBe(10);
    expect([s.hallucination.l1, s.hallucination.l2]).toEqual([0.5, 0.5]);
    expect([s.multi_factor.alpha, s.multi_factor.beta, s.multi_factor.gamma]).toEqual([1, 0.2, 0.2]);
    expect([s.diversity.a, s.diversity.b, s.diversity.c]).toEqual([1, 0.3, 0]);
  });

  it('settings: a bad knob names its YAML path', () => {
    expect(() => parseGraderSettings({ route: { mu: -1 } }, 'graders')).toThrow(/graders\.route\.mu:/);
    expect(() => parseGraderSettings({ recall: { rmax: 5 } }, 'graders')).toThrow(/graders\.recall: .*rmax/);
  });
});
