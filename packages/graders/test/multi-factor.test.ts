import { describe, expect, it } from 'vitest';
import type { EpisodeRecord } from '@thinkfl/env';
import { multiFactor, type GraderSettingsInput } from '../src/index';
import { call, ctxFor, episode, pathWithTruthAt, POD } from './fixtures/episodes';

const FAKE = 'ts-invented-service-0000000000-aaaaa';
const SHOWN = [call(0, 'search_traces', [POD.contacts, POD.order, POD.route])];

describe('multi-factor grader (Eq. 8)', () => {
  const table: {
    name: string;
    ep: EpisodeRecord;
    settings?: GraderSettingsInput;
    score: number;
    parts: { R: number; P: number; H: number };
  }[] = [
    {
      // R = 1, P = min(4/(6-2), 1) = 1, H = 0: 1 + 0.2*1 - 0.2*0
      name: 'solved, path reaches the root cause late',
      ep: episode({ answer: [{ pod: POD.contacts }], path: pathWithTruthAt(6, [4]), tool_calls: SHOWN }),
      score: 1.2,
      parts: { R: 1, P: 1, H: 0 },
    },
    {
      // R = 1 - 1/10 = 0.9, P = 2/(6-2) = 0.5, H = 0.5*1/2 = 0.25: 0.9 + 0.1 - 0.05
      name: 'rank 1, early sighting, one invented item',
      ep: episode({ answer: [{ pod: FAKE }, { pod: POD.contacts }], path: pathWithTruthAt(6, [2]), tool_calls: SHOWN }),
      score: 0.95,
      parts: { R: 0.9, P: 0.5, H: 0.25 },
    },
    {
      // R = 0 (no answer), P = 5/10, H = 0: 0 + 0.1 - 0
      name: 'no answer, path without the root cause',
      ep: episode({ answer: null, path: pathWithTruthAt(5, []), tool_calls: SHOWN }),
      score: 0.1,
      parts: { R: 0, P: 0.5, H: 0 },
    },
    {
      // R = 0 (absent), P = 3/10, H = 0.5*2/2 + 0.5*1/2 = 0.75: 0 + 0.06 - 0.15
      name: 'only a repeated invented pod',
      ep: episode({ answer: [{ pod: FAKE }, { pod: FAKE }], path: pathWithTruthAt(3, []), tool_calls: SHOWN }),
      score: -0.09,
      parts: { R: 0, P: 0.3, H: 0.75 },
    },
    {
      // alpha 2, beta 1, gamma 1: R = 1 - 2/10 = 0.8, P = 1 (L - mu <= 0), H = 0.5*1/3 (order pod
      // never shown): 1.6 + 1 - 1/6
      name: 'custom weights',
      ep: episode({
        answer: [{ pod: POD.order }, { pod: POD.route }, { pod: POD.contacts }],
        path: pathWithTruthAt(1, [1]),
        tool_calls: [call(0, 'x', [POD.contacts, POD.route])],
      }),
      settings: { multi_factor: { alpha: 2, beta: 1, gamma: 1 } },
      score: 1.6 + 1 - 1 / 6,
      parts: { R: 0.8, P: 1, H: 1 / 6 },
    },
  ];
  it.each(table)('$name', async ({ ep, settings, score, parts }) => {
    const r = await multiFactor.grade(ep, ctxFor(undefined, settings));
    expect(r.score).toBeCloseTo(score, 12);
    expect(r.parts.R).toBeCloseTo(parts.R, 12);
    expect(r.parts.P).toBeCloseTo(parts.P, 12);
    expect(r.parts.H).toBeCloseTo(parts.H, 12);
  });
});
