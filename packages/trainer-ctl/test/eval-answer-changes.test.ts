/**
 * scripts/stage-changes.ts's split of changed held-out answers (issue 26, item 4): same answer
 * and calls as the SFT checkpoint, or changed towards the root cause (its service ranked higher
 * or named where it was not), away from it, or at the same rank. Expected counts are worked out
 * by hand from the requests below; the script's table row is read back from its output.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { answerChanges, type AnsweredRequest } from '../src/eval/answer-changes';
import { REPO_ROOT } from '../../../testkit/nezha';

const a = (svc: string) => [{ service: svc }];
const sft: AnsweredRequest[] = [
  { caseId: 'c1', answer: a('x'), toolCalls: 3, ranks: { service: 0 } },
  { caseId: 'c2', answer: a('y'), toolCalls: 3, ranks: { service: null } },
  { caseId: 'c3', answer: a('z'), toolCalls: 3, ranks: { service: 1 } },
  { caseId: 'c4', answer: a('w'), toolCalls: 3, ranks: { service: 0 } },
  { caseId: 'c5', answer: a('v'), toolCalls: 3, ranks: { service: null } },
  { caseId: 'c6', answer: a('u'), toolCalls: 3, ranks: { service: 2 } },
];
const stage: AnsweredRequest[] = [
  // same answer, same calls
  { caseId: 'c1', answer: a('x'), toolCalls: 3, ranks: { service: 0 } },
  // root cause now named (was absent): towards
  { caseId: 'c2', answer: a('t'), toolCalls: 3, ranks: { service: 0 } },
  // rank 1 -> 0: towards
  { caseId: 'c3', answer: a('t'), toolCalls: 2, ranks: { service: 0 } },
  // rank 0 -> absent: away
  { caseId: 'c4', answer: a('s'), toolCalls: 3, ranks: { service: null } },
  // another wrong answer (absent in both): same rank
  { caseId: 'c5', answer: a('r'), toolCalls: 3, ranks: { service: null } },
  // same answer, one call more: changed, rank 2 in both
  { caseId: 'c6', answer: a('u'), toolCalls: 4, ranks: { service: 2 } },
  // not in the SFT evaluation: not compared
  { caseId: 'c7', answer: a('q'), toolCalls: 3, ranks: { service: 0 } },
];

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('answerChanges', () => {
  it('counts same, towards, away and same-rank changes against the SFT checkpoint', () => {
    expect(answerChanges(sft, stage)).toEqual({ compared: 6, same: 1, towards: 2, away: 1, sameRank: 2 });
    // The other way round every move flips; what stayed stays.
    expect(answerChanges(stage, sft)).toEqual({ compared: 6, same: 1, towards: 1, away: 2, sameRank: 2 });
  });

  it('is what scripts/stage-changes.ts prints per stage', () => {
    const dir = mkdtempSync(join(tmpdir(), 'h26-changes-'));
    dirs.push(dir);
    const summary = { perRequest: { service: { mrr: 0.5 } }, perFault: { service: { mrr: 0.5 } } };
    writeFileSync(join(dir, 'metrics.jsonl'), '');
    writeFileSync(join(dir, 'eval-sft.json'), JSON.stringify({ formatValid: 1, summary, requests: sft }));
    writeFileSync(join(dir, 'eval-refinement.json'), JSON.stringify({ formatValid: 1, summary, requests: stage }));
    const out = execFileSync(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'scripts', 'stage-changes.ts'), dir], { cwd: REPO_ROOT, encoding: 'utf8' });
    const row = out.split('\n').find((l) => l.startsWith('| refinement |'));
    expect(row).toBe('| refinement | 1.00 | 0.500 | - | 0.500 | 1 of 6 | 2 | 1 | 2 |');
  });
});
