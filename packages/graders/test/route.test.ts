import { describe, expect, it } from 'vitest';
import type { GroundTruth, PathStep } from '@thinkfl/env';
import { route, routeScore, type GraderSettingsInput } from '../src/index';
import { ctxFor, episode, pathWithTruthAt, POD, POD_TRUTH, SERVICE_TRUTH, step } from './fixtures/episodes';

describe('route grader (Eq. 10)', () => {
  const table: {
    name: string;
    path: PathStep[];
    truth?: GroundTruth;
    settings?: GraderSettingsInput;
    d_max?: number;
    score: number;
    lastStep: number;
  }[] = [
    // L = 6, r' = 4 (last of steps 2 and 4), L - mu = 4: min(4/4, 1).
    { name: 'last seen at L - mu', path: pathWithTruthAt(6, [2, 4]), score: 1, lastStep: 4 },
    // L = 6, r' = 2: min(2/4, 1).
    { name: 'seen early only', path: pathWithTruthAt(6, [2]), score: 0.5, lastStep: 2 },
    // L = 8, r' = 3: 3/6.
    { name: 'L 8, seen at step 3', path: pathWithTruthAt(8, [3]), score: 0.5, lastStep: 3 },
    // L = 8, r' = 8: min(8/6, 1).
    { name: 'seen at the last step', path: pathWithTruthAt(8, [8]), score: 1, lastStep: 8 },
    // L = 7, r' = 1, mu = 0: 1/7.
    { name: 'mu 0', path: pathWithTruthAt(7, [1]), settings: { route: { mu: 0 } }, score: 1 / 7, lastStep: 1 },
    // Edge L - mu <= 0: P = 1.
    { name: 'L = mu', path: pathWithTruthAt(2, [1]), score: 1, lastStep: 1 },
    { name: 'L < mu', path: pathWithTruthAt(1, [1]), score: 1, lastStep: 1 },
    // L = 3, r' = 1, L - mu = 1: min(1/1, 1).
    { name: 'L - mu = 1', path: pathWithTruthAt(3, [1]), score: 1, lastStep: 1 },
    // Not in the path: min(L/D_max, 1).
    { name: 'path without the root cause, L 4', path: pathWithTruthAt(4, []), score: 0.4, lastStep: 0 },
    { name: 'path without the root cause, L 12', path: pathWithTruthAt(12, []), score: 1, lastStep: 0 },
    { name: 'path without the root cause, D_max 20', path: pathWithTruthAt(5, []), d_max: 20, score: 0.25, lastStep: 0 },
    { name: 'empty path', path: [], score: 0, lastStep: 0 },
    // Service-level truth named through its pod at step 2 of 4: min(2/2, 1).
    { name: 'service truth via a pod', path: pathWithTruthAt(4, [2]), truth: SERVICE_TRUTH, score: 1, lastStep: 2 },
    // Pod-level truth: naming only the service does not count; L = 5: 5/10.
    {
      name: 'pod truth, only its service named',
      path: pathWithTruthAt(5, [3], 'ts-contacts-service'),
      score: 0.5,
      lastStep: 0,
    },
    // Mixed case in a component: L = 4, r' = 2: 2/2.
    {
      name: 'case-insensitive',
      path: [step('a', {}), step('b', {}, [POD.contacts.toUpperCase()]), step('c', {}), step('d', {})],
      score: 1,
      lastStep: 2,
    },
  ];
  it.each(table)('$name', async ({ path, truth, settings, d_max, score, lastStep }) => {
    const r = await route.grade(episode({ path }), ctxFor(truth ?? POD_TRUTH, settings, d_max));
    expect(r.score).toBeCloseTo(score, 12);
    expect(r.parts).toEqual({ steps: path.length, lastStep, found: lastStep > 0 ? 1 : 0 });
  });

  it('routeScore is the formula on its own', () => {
    const s = { mu: 2 };
    // D_max 10: 3/(10-2), min(9/8, 1), 2 <= mu, 6/10
    expect([routeScore(10, 3, s, 10), routeScore(10, 9, s, 10), routeScore(2, 2, s, 10), routeScore(6, null, s, 10)]).toEqual([
      0.375, 1, 1, 0.6,
    ]);
  });
});
