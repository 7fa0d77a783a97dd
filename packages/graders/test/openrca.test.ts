import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO_ROOT } from '../../../testkit/nezha';
import { parseOpenRcaPrediction, pyRound2, scoreOpenRca, withinOneMinute } from '../src/index';

interface Vector {
  name: string;
  scoring_points: string;
  prediction: string;
  score: number;
  passed: string[];
  failed: string[];
}

// Scores computed by OpenRCA's own evaluate.py (see the file's "source").
const vectors = JSON.parse(readFileSync(join(REPO_ROOT, '..', 'shared', 'test-vectors', 'openrca-scoring.json'), 'utf8')) as {
  cases: Vector[];
};

describe('OpenRCA scoring reproduces the reference script', () => {
  it('has the 32 reference cases', () => expect(vectors.cases.length).toBe(32));
  for (const v of vectors.cases) {
    it(v.name, () => {
      const r = scoreOpenRca(v.prediction, v.scoring_points);
      expect(r.score).toBe(v.score);
      expect(r.correct).toBe(v.score === 1);
      expect([...r.passed].sort()).toEqual([...v.passed].sort());
      expect([...r.failed].sort()).toEqual([...v.failed].sort());
    });
  }
});

describe('OpenRCA rules, hand-checked', () => {
  const pts = (t: string, c: string, r: string, i = 'only') =>
    `The ${i} root cause occurrence time is within 1 minutes (i.e., <=1min) of ${t}\nThe ${i} predicted root cause component is ${c}\nThe ${i} predicted root cause reason is ${r}`;
  const pred = (t: string, c: string, r: string) =>
    `{"root cause occurrence datetime": "${t}", "root cause component": "${c}", "root cause reason": "${r}"}`;

  it('60 s is inside the window, 61 s outside, either side', () => {
    expect(withinOneMinute('2021-03-04 14:57:00', '2021-03-04 14:58:00')).toBe(true);
    expect(withinOneMinute('2021-03-04 14:57:00', '2021-03-04 14:55:59')).toBe(false);
    expect(withinOneMinute('2021-03-04 23:59:30', '2021-03-05 00:00:30')).toBe(true);
    expect(withinOneMinute('2021-03-04 14:57:00', '2021-02-30 14:57:00')).toBe(false);
  });

  it('best permutation: 2 failures given swapped score 6/6', () => {
    const sp = `${pts('2021-03-04 10:00:00', 'A', 'cpu', '1-th')}\n${pts('2021-03-04 11:00:00', 'B', 'mem', '2-th')}`;
    const p = `{"1": ${pred('2021-03-04 11:00:30', 'B', 'mem')}, "2": ${pred('2021-03-04 10:00:00', 'A', 'cpu')}}`;
    expect(scoreOpenRca(p, sp).score).toBe(1);
    // Swapped with one reason wrong: 5 of 6 = 0.8333 -> 0.83.
    const q = `{"1": ${pred('2021-03-04 11:00:30', 'B', 'disk')}, "2": ${pred('2021-03-04 10:00:00', 'A', 'cpu')}}`;
    expect(scoreOpenRca(q, sp).score).toBe(0.83);
  });

  it('a wrong number of predictions scores 0 even when one is right', () => {
    const sp = pts('2021-03-04 10:00:00', 'A', 'cpu');
    expect(scoreOpenRca(`${pred('2021-03-04 10:00:00', 'A', 'cpu')} ${pred('2021-03-04 10:00:00', 'A', 'cpu')}`, sp).score).toBe(0);
  });

  it('reads predictions with the reference pattern', () => {
    expect(parseOpenRcaPrediction('{}')).toEqual([{ datetime: '', component: '', reason: '' }]);
    expect(parseOpenRcaPrediction('no json')).toEqual([]);
  });

  it('rounds as Python round(x, 2): ties to even on exact binary halves', () => {
    expect(pyRound2(1 / 8)).toBe(0.12); // Python: round(0.125, 2) == 0.12
    expect(pyRound2(3 / 8)).toBe(0.38); // round(0.375, 2) == 0.38
    expect(pyRound2(7 / 9)).toBe(0.78);
    expect(pyRound2(1 / 40)).toBe(0.03); // 0.025 is stored slightly above the half
    expect(pyRound2(1)).toBe(1);
  });
});
