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
  { case_id: 'c1', answer: a('x'), tool_calls: 3, ranks: { service: 0 } },
  { case_id: 'c2', answer: a('y'), tool_calls: 3, ranks: { service: null } },
  { case_id: 'c3', answer: a('z'), tool_calls: 3, ranks: { service: 1 } },
  { case_id: 'c4', answer: a('w'), tool_calls: 3, ranks: { service: 0 } },
  { case_id: 'c5', answer: a('v'), tool_calls: 3, ranks: { service: null } },
  { case_id: 'c6', answer: a('u'), tool_calls: 3, ranks: { service: 2 } },
];
const stage: AnsweredRequest[] = [
  // same answer, same calls
  { case_id: 'c1', answer: a('x'), tool_calls: 3, ranks: { service: 0 } },
  // root cause now named (was absent): towards
  { case_id: 'c2', answer: a('t'), tool_calls: 3, ranks: { service: 0 } },
  // rank 1 -> 0: towards
  { case_id: 'c3', answer: a('t'), tool_calls: 2, ranks: { service: 0 } },
  // rank 0 -> absent: away
  { case_id: 'c4', answer: a('s'), tool_calls: 3, ranks: { service: null } },
  // another wrong answer (absent in both): same rank
  { case_id: 'c5', answer: a('r'), tool_calls: 3, ranks: { service: null } },
  // same answer, one call more: changed, rank 2 in both
  { case_id: 'c6', answer: a('u'), tool_calls: 4, ranks: { service: 2 } },
  // not in the SFT evaluation: not compared
  { case_id: 'c7', answer: a('q'), tool_calls: 3, ranks: { service: 0 } },
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
    const summary = { per_request: { service: { mrr: 0.5 } }, per_fault: { service: { mrr: 0.5 } } };
    writeFileSync(join(dir, 'metrics.jsonl'), '');
    writeFileSync(join(dir, 'eval-sft.json'), JSON.stringify({ format_valid: 1, summary, requests: sft }));
    writeFileSync(join(dir, 'eval-refinement.json'), JSON.stringify({ format_valid: 1, summary, requests: stage }));
    const out = execFileSync(process.execPath, ['--import', 'tsx', join(REPO_ROOT, 'scripts', 'stage-changes.ts'), dir], {
      cwd: REPO_ROOT,
      encoding: 'utf8',
    });
    const row = out.split('\n').find((l) => l.startsWith('| refinement |'));
    expect(row).toBe('| refinement | 1.00 | 0.500 | - | 0.500 | 1 of 6 | 2 | 1 | 2 |');
  });
});
