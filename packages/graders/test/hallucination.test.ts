import { describe, expect, it } from 'vitest';
import type { GroundTruth, RootCause, ToolCallRecord } from '@thinkfl/env';
import { hallucination, type GraderSettingsInput } from '../src/index';
import { call, ctxFor, episode, POD, POD_TRUTH, SERVICE_TRUTH } from './fixtures/episodes';

/** What the tools showed: the contacts and order pods, and the route service by name. */
const SEEN: ToolCallRecord[] = [
  call(0, 'search_traces', [POD.contacts, 'ts-contacts-service']),
  call(1, 'search_fluctuating_metrics', [POD.order, 'ts-route-service']),
];
const FAKE = 'ts-invented-service-0000000000-aaaaa';

describe('hallucination grader (Eq. 11)', () => {
  const table: {
    name: string;
    answer: RootCause[] | null;
    calls?: ToolCallRecord[];
    truth?: GroundTruth;
    settings?: GraderSettingsInput;
    score: number;
    counts: { total: number; invalid: number; duplicate: number };
  }[] = [
    {
      name: 'all seen, distinct',
      answer: [{ pod: POD.contacts }, { pod: POD.order }],
      score: 0,
      counts: { total: 2, invalid: 0, duplicate: 0 },
    },
    // 0.5 * 1/2
    {
      name: 'one invented pod',
      answer: [{ pod: POD.contacts }, { pod: FAKE }],
      score: 0.25,
      counts: { total: 2, invalid: 1, duplicate: 0 },
    },
    // 0.5 * 1/2
    {
      name: 'one duplicate',
      answer: [{ pod: POD.contacts }, { pod: POD.contacts.toUpperCase() }],
      score: 0.25,
      counts: { total: 2, invalid: 0, duplicate: 1 },
    },
    // 0.5 * 2/3 (two repeats of the first item)
    {
      name: 'three times the same',
      answer: [{ pod: POD.order }, { pod: POD.order }, { pod: POD.order }],
      score: 1 / 3,
      counts: { total: 3, invalid: 0, duplicate: 2 },
    },
    // 0.5 * 2/4 + 0.5 * 1/4: the repeated invented pod is invalid twice and a duplicate once
    {
      name: 'invented and repeated',
      answer: [{ pod: FAKE }, { pod: POD.contacts }, { pod: FAKE }, { pod: POD.order }],
      score: 0.375,
      counts: { total: 4, invalid: 2, duplicate: 1 },
    },
    // 0.5 * 2/2 + 0.5 * 1/2
    {
      name: 'nothing seen at all',
      answer: [{ pod: FAKE }, { pod: FAKE }],
      calls: [],
      score: 0.75,
      counts: { total: 2, invalid: 2, duplicate: 1 },
    },
    // The service of a shown pod counts as shown: 0.
    {
      name: 'service of a shown pod',
      answer: [{ service: 'ts-order-service', pod: POD.order }],
      score: 0,
      counts: { total: 1, invalid: 0, duplicate: 0 },
    },
    // A real pod with an invented one beside it in the same item: invalid. 0.5 * 1/1
    {
      name: 'item with one invented field',
      answer: [{ service: 'ts-contacts-service', pod: FAKE }],
      score: 0.5,
      counts: { total: 1, invalid: 1, duplicate: 0 },
    },
    // An item naming nothing is invalid: 0.5 * 1/2
    {
      name: 'item naming nothing',
      answer: [{ pod: POD.contacts }, { reason: 'cpu' }],
      score: 0.25,
      counts: { total: 2, invalid: 1, duplicate: 0 },
    },
    // Service level: the route service was shown by name, the pod of the order service by its pod.
    // Duplicates at service level: order pod and order service are one answer. 0.5 * 1/3
    {
      name: 'service-level duplicates',
      truth: SERVICE_TRUTH,
      answer: [{ service: 'ts-order-service' }, { pod: POD.order }, { service: 'ts-route-service' }],
      score: 1 / 6,
      counts: { total: 3, invalid: 0, duplicate: 1 },
    },
    // l1 = 1, l2 = 0: 1 * 1/2
    {
      name: 'custom lambdas',
      answer: [{ pod: FAKE }, { pod: POD.order }],
      settings: { hallucination: { l1: 1, l2: 0 } },
      score: 0.5,
      counts: { total: 2, invalid: 1, duplicate: 0 },
    },
    { name: 'empty answer', answer: [], score: 0, counts: { total: 0, invalid: 0, duplicate: 0 } },
    { name: 'no answer', answer: null, score: 0, counts: { total: 0, invalid: 0, duplicate: 0 } },
  ];
  it.each(table)('$name', async ({ answer, calls, truth, settings, score, counts }) => {
    const r = await hallucination.grade(episode({ answer, tool_calls: calls ?? SEEN }), ctxFor(truth ?? POD_TRUTH, settings));
    expect(r.score).toBeCloseTo(score, 12);
    expect(r.parts).toEqual(counts);
  });

  it("does not count the answer tool's own echo as evidence", async () => {
    // print_results lists the answered pods among its components; FAKE is still invented: 0.5 * 1/1.
    const calls = [...SEEN, call(2, 'print_results', [FAKE])];
    const r = await hallucination.grade(episode({ answer: [{ pod: FAKE }], tool_calls: calls }), ctxFor());
    expect(r.score).toBe(0.5);
  });
});
