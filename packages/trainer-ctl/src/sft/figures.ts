/**
 * What SFT is judged by on held-out cases: the share of assistant turns that made a valid
 * tool call (parsed, an offered tool, arguments valid), the share of episodes that ended with
 * a valid print_results, the share that are format-valid as a run's evaluation counts them,
 * and service-level Recall@1 per fault (for information).
 */
import type { Case, Dataset, EpisodeRecord, EvalResult } from '@thinkfl/env';
import { answeredCorrectly } from '@thinkfl/env';

export interface PlayedEpisode {
  case: Case;
  record: EpisodeRecord;
}

export interface PolicyFigures {
  episodes: number;
  turns: number;
  validTurns: number;
  validFinals: number;
  /** Episodes that are format-valid (formatValid): answered on their own, every turn valid. */
  formatValid: number;
  /** Fault id -> [cases whose answer put the true service first, cases played]. */
  recallAt1: Map<string, [number, number]>;
}

/**
 * Format validity of an episode: it ended with its own print_results call (not forced, not
 * cut off) and every assistant turn made a well-formed call of an offered tool.
 */
export function formatValid(e: EpisodeRecord): boolean {
  return (
    e.stop_reason === 'answered' &&
    e.answer !== null &&
    e.answer.length > 0 &&
    e.turns.length > 0 &&
    e.turns.every((t) => t.parsed && t.offered_tool && t.args_valid)
  );
}

/** How a policy's episodes went, as a run's evaluation and `trainer-ctl eval` report it: shares of format-valid and answered episodes, tool calls an episode. */
export interface EpisodeFigures {
  format_valid: number;
  answered: number;
  tool_calls: number;
}

export function episodeFigures(episodes: readonly EpisodeRecord[]): EpisodeFigures {
  const n = Math.max(1, episodes.length);
  const share = (f: (e: EpisodeRecord) => boolean) => episodes.filter(f).length / n;
  return {
    format_valid: share(formatValid),
    answered: share((e) => e.stop_reason === 'answered'),
    tool_calls: episodes.reduce((a, e) => a + e.tool_calls.length, 0) / n,
  };
}

/** Format validity of the cases of one fault type. */
export interface TypeValidity {
  cases: number;
  format_valid: number;
}

/**
 * Format validity per request (a request with no episode is invalid) and by its fault's type,
 * types in name order: how a change is judged by fault type on held-out faults.
 */
export function validityByType(
  episodes: readonly EpisodeRecord[],
  result: Pick<EvalResult, 'requests' | 'faults'>,
): { requests: (EvalResult['requests'][number] & { format_valid: boolean })[]; by_type: Record<string, TypeValidity> } {
  const valid = new Map(episodes.map((e) => [e.case_id, formatValid(e)]));
  const requests = result.requests.map((r) => ({ ...r, format_valid: valid.get(r.case_id) ?? false }));
  const typeOf = new Map(result.faults.map((f) => [f.fault_id, f.type]));
  const byType: Record<string, TypeValidity> = {};
  for (const r of requests) {
    const t = (byType[typeOf.get(r.fault_id) ?? 'unknown'] ??= { cases: 0, format_valid: 0 });
    t.cases++;
    t.format_valid += r.format_valid ? 1 : 0;
  }
  for (const t of Object.values(byType)) t.format_valid /= t.cases;
  return { requests, by_type: Object.fromEntries(Object.entries(byType).sort(([a], [b]) => a.localeCompare(b))) };
}

/** "exception 0.88 (8), return 1.00 (8)": validity and cases per fault type. */
export function formatByType(byType: Record<string, TypeValidity>): string {
  return Object.entries(byType)
    .map(([type, t]) => `${type} ${t.format_valid.toFixed(2)} (${t.cases})`)
    .join(', ');
}

export function policyFigures(dataset: Dataset, played: readonly PlayedEpisode[]): PolicyFigures {
  const f: PolicyFigures = { episodes: 0, turns: 0, validTurns: 0, validFinals: 0, formatValid: 0, recallAt1: new Map() };
  for (const { case: c, record } of played) {
    f.episodes++;
    f.turns += record.turns.length;
    f.validTurns += record.turns.filter((t) => t.parsed && t.offered_tool && t.args_valid).length;
    if (record.answer !== null) f.validFinals++;
    if (formatValid(record)) f.formatValid++;
    const r = f.recallAt1.get(c.fault_id) ?? [0, 0];
    f.recallAt1.set(c.fault_id, [r[0] + (answeredCorrectly(dataset, c, record) ? 1 : 0), r[1] + 1]);
  }
  return f;
}

const pct = (a: number, b: number): string => `${b ? ((100 * a) / b).toFixed(1) : '0.0'}%`;

export function formatFigures(f: PolicyFigures): string {
  return [
    `valid tool calls: ${f.validTurns}/${f.turns} turns = ${pct(f.validTurns, f.turns)}`,
    `valid print_results: ${f.validFinals}/${f.episodes} episodes = ${pct(f.validFinals, f.episodes)}`,
    `format-valid episodes (answered on their own, every turn valid): ${f.formatValid}/${f.episodes} = ${pct(f.formatValid, f.episodes)}`,
    `Recall@1 (service) per fault: ${[...f.recallAt1].map(([id, [hit, n]]) => `${id} ${hit}/${n}`).join(', ')}`,
  ].join('\n');
}
