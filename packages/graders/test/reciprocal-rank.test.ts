import { describe, expect, it } from 'vitest';
import type { GroundTruth, RootCause } from '@thinkfl/env';
import { COMPOSITE_PRESETS, gradeGroup, parseComposite, reciprocalRank, type GraderSettingsInput } from '../src/index';
import { ctxFor, episode, POD, POD_TRUTH, SERVICE_OF, SERVICE_TRUTH } from './fixtures/episodes';

describe('reciprocal_rank grader (MRR as a reward)', () => {
  // Expected values by hand: 1/(r+1) for the 0-based rank r of the truth's service among distinct services.
  const table: {
    name: string;
    answer: RootCause[] | null;
    truth?: GroundTruth;
    settings?: GraderSettingsInput;
    score: number;
    rank: number;
  }[] = [
    { name: 'first', answer: [{ pod: POD.contacts }], score: 1, rank: 0 },
    { name: 'second', answer: [{ pod: POD.order }, { pod: POD.contacts }], score: 0.5, rank: 1 },
    { name: 'third', answer: [{ pod: POD.order }, { pod: POD.route }, { pod: POD.contacts }], score: 1 / 3, rank: 2 },
    {
      name: 'fourth, by service name',
      answer: [{ pod: POD.order }, { pod: POD.route }, { pod: POD.travel }, { service: 'ts-contacts-service' }],
      score: 0.25,
      rank: 3,
    },
    // Service level: another pod name of the true service is the same service guess (rank 0); at pod level it is not the truth.
    { name: 'the service named by service only', answer: [{ service: 'TS-Contacts-Service ' }], score: 1, rank: 0 },
    {
      name: 'pod level: service alone names no pod',
      answer: [{ service: 'ts-contacts-service' }],
      settings: { reciprocal_rank: { level: 'pod' } },
      score: 0,
      rank: -1,
    },
    {
      name: 'pod level: the pod second',
      answer: [{ pod: POD.travel }, { pod: POD.contacts }],
      settings: { reciprocal_rank: { level: 'pod' } },
      score: 0.5,
      rank: 1,
    },
    // Two pods of one wrong service are one guess: the truth's service is second.
    {
      name: 'two items of one wrong service',
      answer: [{ pod: POD.order }, { service: 'ts-order-service' }, { pod: POD.contacts }],
      score: 0.5,
      rank: 1,
    },
    { name: 'absent', answer: [{ pod: POD.order }], score: 0, rank: -1 },
    { name: 'empty answer', answer: [], score: 0, rank: -1 },
    { name: 'no answer', answer: null, score: 0, rank: -1 },
    {
      name: 'service truth, third',
      answer: [{ service: 'a' }, { service: 'b' }, { service: 'ts-contacts-service' }],
      truth: SERVICE_TRUTH,
      score: 1 / 3,
      rank: 2,
    },
    // A node fault names no service: ranked at its own level (node).
    {
      name: 'node truth ranked at node level',
      answer: [{ node: '33.33.33.80' }, { node: '33.33.33.79' }],
      truth: { node: '33.33.33.79', level: 'node' },
      score: 0.5,
      rank: 1,
    },
  ];
  it.each(table)('$name', async ({ answer, truth, settings, score, rank }) => {
    const r = await reciprocalRank.grade(episode({ answer }), ctxFor(truth ?? POD_TRUTH, settings));
    expect(r.score).toBeCloseTo(score, 12);
    expect(r.parts.rank).toBe(rank);
  });

  it('is a preset usable as any stage reward, and a group is graded by it in sample order', async () => {
    expect(parseComposite('reciprocal_rank', 'graders.stage_rewards.refinement')).toEqual(COMPOSITE_PRESETS.reciprocal_rank);
    const answers: RootCause[][] = [[{ pod: POD.contacts }], [{ pod: POD.order }, { pod: POD.contacts }], [{ pod: POD.order }]];
    const graded = await gradeGroup(
      answers.map((answer) => episode({ answer })),
      { truth: POD_TRUTH, podToService: SERVICE_OF, d_max: 10 },
      'reciprocal_rank',
    );
    expect(graded.totals).toEqual([1, 0.5, 0]);
  });
});
