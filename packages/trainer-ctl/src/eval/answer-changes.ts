/**
 * How the greedy answers of two evaluations of the same cases differ (scripts/stage-changes.ts
 * compares each stage with the SFT checkpoint): per request the same answer with the same number
 * of tool calls, or a change that moved the root cause's service towards the top of the answer
 * (a better rank, or named where it was not), away from it, or left its rank as it was.
 */
export interface AnsweredRequest {
  case_id: string;
  answer: unknown;
  tool_calls?: number;
  /** 0-based rank of the truth per level; null where the answer does not name it. */
  ranks: Partial<Record<string, number | null>>;
}

export interface AnswerChanges {
  /** Requests of `after` that `before` also has. */
  compared: number;
  same: number;
  towards: number;
  away: number;
  /** Changed, with the root cause's service at the same rank (or unranked in both). */
  sameRank: number;
}

/** A rank to compare by: lower is better, unnamed last. */
const order = (r: number | null | undefined) => (r === null || r === undefined ? Number.POSITIVE_INFINITY : r);

export function answerChanges(before: readonly AnsweredRequest[], after: readonly AnsweredRequest[], level = 'service'): AnswerChanges {
  const by = new Map(before.map((r) => [r.case_id, r]));
  const out: AnswerChanges = { compared: 0, same: 0, towards: 0, away: 0, sameRank: 0 };
  for (const r of after) {
    const b = by.get(r.case_id);
    if (!b) continue;
    out.compared++;
    if (b.tool_calls === r.tool_calls && JSON.stringify(b.answer) === JSON.stringify(r.answer)) {
      out.same++;
      continue;
    }
    const was = order(b.ranks[level]);
    const now = order(r.ranks[level]);
    if (now < was) out.towards++;
    else if (now > was) out.away++;
    else out.sameRank++;
  }
  return out;
}
