/**
 * OpenRCA graders over an episode (RCAFlow's grading, ../shared/seeds/004 Sec. 4.2): the answer's
 * first n items (n = the query's failures) become OpenRCA's answer JSON (datetime, component,
 * reason, in the reference's key order) and are scored with scoreOpenRca against the query's
 * scoring points. Without an OpenRCA query in the context, the points are the truth's component
 * (at its level), its fault type as reason, and its start time when the context has one, as one
 * failure. `openrca_score` is the matched share (OpenRCA's "partial" is its mean), `openrca_correct`
 * is 1 when every point matched.
 */
import { componentAt, type RootCause } from '@thinkfl/env';
import { matchContext } from '../match';
import type { GradeContext, GradeResult, Grader } from '../types';
import { scoreOpenRca } from './score';

const time = (us: number): string => new Date(Math.floor(us / 1000)).toISOString().slice(0, 19).replace('T', ' ');

export function scoringPointsOf(ctx: GradeContext): { points: string; failures: number } {
  if (ctx.openrca) return { points: ctx.openrca.scoringPoints, failures: ctx.openrca.failures };
  const lines: string[] = [];
  if (ctx.faultStartUs !== undefined)
    lines.push(`The only root cause occurrence time is within 1 minutes (i.e., <=1min) of ${time(ctx.faultStartUs)}`);
  const c = componentAt(ctx.truth, ctx.truth.level, matchContext(ctx.podToService));
  if (c) lines.push(`The only predicted root cause component is ${c}`);
  if (ctx.faultType) lines.push(`The only predicted root cause reason is ${ctx.faultType}`);
  return { points: lines.join('\n'), failures: 1 };
}

/** The answer's first `n` items as OpenRCA's answer JSON. */
export function openRcaAnswer(answer: RootCause[] | null, n: number, ctx: GradeContext): string {
  const mc = matchContext(ctx.podToService);
  const out: Record<string, Record<string, string>> = {};
  (answer ?? []).slice(0, n).forEach((item, i) => {
    const o: Record<string, string> = {};
    if (typeof item?.time === 'string') o['root cause occurrence datetime'] = item.time;
    const c = componentAt(item, ctx.truth.level, mc);
    if (c) o['root cause component'] = c;
    // The fault type is OpenRCA's reason; free-text reasons only stand in when no type is given.
    const reason = item?.type ?? item?.reason;
    if (typeof reason === 'string') o['root cause reason'] = reason;
    out[String(i + 1)] = o;
  });
  return JSON.stringify(out);
}

function grade(episode: Parameters<Grader['grade']>[0], ctx: GradeContext): GradeResult & { correct: boolean } {
  const { points, failures } = scoringPointsOf(ctx);
  const r = scoreOpenRca(openRcaAnswer(episode.answer, failures, ctx), points);
  return { score: r.score, correct: r.correct, parts: { passed: r.passed.length, failed: r.failed.length, predictions: r.predictions } };
}

export const openrcaScore: Grader = {
  name: 'openrca_score',
  description: "OpenRCA's score: matched points / points (time within 60 s, exact component and reason, best permutation, wrong count 0)",
  grade(episode, ctx) {
    const { score, parts } = grade(episode, ctx);
    return { score, parts };
  },
};

export const openrcaCorrect: Grader = {
  name: 'openrca_correct',
  description: "OpenRCA's Correct: 1 when every scoring point matched",
  grade(episode, ctx) {
    const { correct, parts } = grade(episode, ctx);
    return { score: correct ? 1 : 0, parts };
  },
};
