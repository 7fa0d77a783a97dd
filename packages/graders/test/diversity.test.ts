import { describe, expect, it } from 'vitest';
import type { PathStep, RootCause } from '@thinkfl/env';
import { dedupedCalls, diversity, MemoryDiversityCache, parseGraderSettings, pathKey } from '../src/index';
import { ctxFor, episode, POD, step } from './fixtures/episodes';

const A = step('search_traces', { parent_span_id: 's1' });
const B = step('search_traces', { parent_span_id: 's2' });
const M = step('search_fluctuating_metrics', { service_name: 'ts-contacts-service', timestamp: 1674953044 });

describe('path key', () => {
  it('drops repeated identical calls, keeping first occurrences in order', () => {
    expect(dedupedCalls([A, B, A, M, B]).map(([t, a]) => `${t}${a}`)).toEqual([A, B, M].map((s) => `${s.tool}${s.args}`));
  });

  const table: { name: string; p: PathStep[]; q: PathStep[]; same: boolean }[] = [
    { name: 'repeats do not make a new path', p: [A, B, M], q: [A, A, B, M, B], same: true },
    {
      name: 'argument key order is irrelevant',
      p: [step('t', { a: 1, b: { c: 2, d: 3 } })],
      q: [{ tool: 't', args: '{"b":{"d":3,"c":2},"a":1}', components: [] }],
      same: true,
    },
    { name: 'order of calls matters', p: [A, B], q: [B, A], same: false },
    { name: 'arguments matter', p: [A], q: [B], same: false },
    { name: 'the tool matters', p: [A], q: [{ ...A, tool: 'search_logs' }], same: false },
    {
      name: 'non-JSON arguments are kept verbatim',
      p: [{ tool: 't', args: 'not json', components: [] }],
      q: [{ tool: 't', args: 'not json ', components: [] }],
      same: false,
    },
  ];
  it.each(table)('$name', ({ p, q, same }) => {
    expect(pathKey(p) === pathKey(q)).toBe(same);
  });

  it('is a SHA-256 hex digest; the empty path has one too', () => {
    expect(pathKey([])).toMatch(/^[0-9a-f]{64}$/);
  });
});

describe('diversity grader (Algorithm 2), in-memory cache', () => {
  it('scores A, B, C in sample order and across steps', async () => {
    const ctx = { ...ctxFor(), diversity: new MemoryDiversityCache() };
    const solved: RootCause[] = [{ pod: POD.contacts }];
    const second: RootCause[] = [{ pod: POD.order }, { pod: POD.contacts }];
    const table: { path: PathStep[]; answer: RootCause[] | null; score: number; isNew: number; steps: number }[] = [
      { path: [A, B], answer: solved, score: 1, isNew: 1, steps: 2 }, // new, truth at rank 0: A
      { path: [A, B, B], answer: solved, score: 0, isNew: 0, steps: 2 }, // same path after de-duplication: C
      { path: [A, M], answer: second, score: 0.3, isNew: 1, steps: 2 }, // new, truth at rank 1: B
      { path: [M], answer: null, score: 0.3, isNew: 1, steps: 1 }, // new, no answer: B
      { path: [], answer: solved, score: 1, isNew: 1, steps: 0 }, // the empty path is a path too: A
      { path: [], answer: solved, score: 0, isNew: 0, steps: 0 }, // C
      { path: [A, M], answer: solved, score: 0, isNew: 0, steps: 2 }, // seen (earlier, unsolved): C
    ];
    for (const row of table) {
      const r = await diversity.grade(episode({ path: row.path, answer: row.answer }), ctx);
      expect([r.score, r.parts.new, r.parts.steps]).toEqual([row.score, row.isNew, row.steps]);
    }
    // Another question starts with an empty memory: A again.
    const other = await diversity.grade(episode({ path: [A, B], answer: solved }), { ...ctx, questionId: 'q2' });
    expect(other.score).toBe(1);
  });

  it('uses the configured A, B, C', async () => {
    const ctx = { ...ctxFor(undefined, { diversity: { a: 2, b: 0.5, c: -1 } }), diversity: new MemoryDiversityCache() };
    const scores = [];
    for (const answer of [[{ pod: POD.order }], [{ pod: POD.order }]]) {
      scores.push((await diversity.grade(episode({ path: [A], answer }), ctx)).score);
    }
    scores.push((await diversity.grade(episode({ path: [B], answer: [{ pod: POD.contacts }] }), ctx)).score);
    expect(scores).toEqual([0.5, -1, 2]);
  });

  it('refuses settings that break A > B > C, naming the path', () => {
    expect(() => parseGraderSettings({ diversity: { b: 2 } }, 'stages.2.graders')).toThrow(
      /stages\.2\.graders\.diversity: Algorithm 2 needs a > b > c/,
    );
  });

  it('needs a cache', async () => {
    await expect(Promise.resolve(diversity.grade(episode(), ctxFor()))).rejects.toThrow(/needs a DiversityCache/);
  });
});
