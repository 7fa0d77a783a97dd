import { describe, expect, it } from 'vitest';
import type { GroundTruth, RootCause } from '@thinkfl/env';
import { answerKey, namesTruth, truthRank } from '../src/index';
import { ctxFor, POD, POD_TRUTH, SERVICE_TRUTH } from './fixtures/episodes';

const NODE_TRUTH: GroundTruth = { node: 'node-3', level: 'node' };

describe('truthRank', () => {
  const table: { name: string; truth: GroundTruth; answer: RootCause[] | null; rank: number | null }[] = [
    { name: 'pod first', truth: POD_TRUTH, answer: [{ pod: POD.contacts }], rank: 0 },
    { name: 'pod third', truth: POD_TRUTH, answer: [{ pod: POD.order }, { pod: POD.route }, { pod: POD.contacts }], rank: 2 },
    { name: 'case and blanks ignored', truth: POD_TRUTH, answer: [{ pod: `  ${POD.contacts.toUpperCase()} ` }], rank: 0 },
    { name: 'pod level ignores the service field', truth: POD_TRUTH, answer: [{ service: 'ts-contacts-service' }], rank: null },
    {
      name: 'service level: service field',
      truth: SERVICE_TRUTH,
      answer: [{ service: 'ts-order-service' }, { service: 'TS-Contacts-Service' }],
      rank: 1,
    },
    { name: 'service level: pod of the true service', truth: SERVICE_TRUTH, answer: [{ pod: POD.contacts }], rank: 0 },
    // Two pods of one service are one service guess (env's rankOfTruth counts distinct components).
    {
      name: 'service level: repeated service takes one rank',
      truth: SERVICE_TRUTH,
      answer: [{ service: 'ts-order-service' }, { pod: POD.order }, { pod: POD.contacts }],
      rank: 1,
    },
    { name: 'node level', truth: NODE_TRUTH, answer: [{ node: 'node-1' }, { node: 'Node-3' }], rank: 1 },
    {
      name: 'items naming nothing take no rank',
      truth: POD_TRUTH,
      answer: [{ reason: 'slow' }, { pod: ' ' }, { pod: POD.contacts }],
      rank: 0,
    },
    { name: 'empty answer', truth: POD_TRUTH, answer: [], rank: null },
    { name: 'no answer', truth: POD_TRUTH, answer: null, rank: null },
  ];
  it.each(table)('$name', ({ truth, answer, rank }) => {
    expect(truthRank(answer, ctxFor(truth))).toBe(rank);
  });

  it('throws when the truth names nothing at its level', () => {
    expect(() => truthRank([], ctxFor({ service: 'ts-contacts-service', level: 'node' }))).toThrow(/names no node/);
  });

  it('accepts a pod-to-service function (e.g. Topology.serviceOfPod)', () => {
    const ctx = { ...ctxFor(SERVICE_TRUTH), podToService: (p: string) => (p === POD.contacts ? 'ts-contacts-service' : undefined) };
    expect(truthRank([{ pod: POD.order }, { pod: POD.contacts }], ctx)).toBe(0);
  });
});

describe('namesTruth', () => {
  const table: { name: string; truth: GroundTruth; component: string; expected: boolean }[] = [
    { name: 'the true pod', truth: POD_TRUTH, component: POD.contacts, expected: true },
    { name: 'its service at pod level', truth: POD_TRUTH, component: 'ts-contacts-service', expected: false },
    { name: 'the true service', truth: SERVICE_TRUTH, component: ' TS-CONTACTS-SERVICE', expected: true },
    { name: 'a pod of the true service', truth: SERVICE_TRUTH, component: POD.contacts, expected: true },
    { name: 'another pod', truth: SERVICE_TRUTH, component: POD.order, expected: false },
    { name: 'blank', truth: POD_TRUTH, component: '  ', expected: false },
  ];
  it.each(table)('$name', ({ truth, component, expected }) => {
    expect(namesTruth(component, ctxFor(truth))).toBe(expected);
  });
});

describe('answerKey', () => {
  it('identifies items by their component at the truth level, else by all fields', () => {
    const ctx = ctxFor(SERVICE_TRUTH);
    expect(answerKey({ pod: POD.order }, ctx)).toBe(answerKey({ service: 'TS-ORDER-SERVICE' }, ctx));
    expect(answerKey({ node: 'n1' }, ctx)).not.toBe(answerKey({ node: 'n2' }, ctx));
  });
});
