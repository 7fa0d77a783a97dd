/**
 * Plain-text tables of evaluations, as `trainer-ctl eval` prints them: one policy's scopes,
 * or several policies on the same cases side by side (each scope's rows one per policy).
 */
import type { Level } from '../types';
import type { EvalSummary } from './evaluate';
import { RECALL_KS, type RankSummary } from './metrics';

const pct = (x: number): string => (100 * x).toFixed(2).padStart(7);

const LABEL = 28;

function figures(s: RankSummary): string {
  const recalls = RECALL_KS.map((k) => pct(s.recall[k] ?? 0)).join(' ');
  return `${String(s.n).padStart(6)} ${recalls} ${s.mrr.toFixed(4).padStart(7)} ${s.mrr_top10.toFixed(4).padStart(9)}`;
}

const figuresHead = (): string =>
  `${'n'.padStart(6)} ${RECALL_KS.map((k) => `R@${k}`.padStart(7)).join(' ')} ${'MRR'.padStart(7)} ${'MRR@10'.padStart(9)}`;

/** Scopes at a level, in print order: per request, per fault (best request), by vote (Eq. 10), by vote in 10-request batches. */
const SCOPES = 4;
function scopes(summary: EvalSummary, l: Level): [string, RankSummary | undefined][] {
  return [
    [`per request, ${l}`, summary.per_request[l]],
    [`per fault, ${l}`, summary.per_fault[l]],
    [`per fault by vote, ${l}`, summary.per_fault_vote?.[l]],
    [`per 10-batch vote, ${l}`, summary.per_batch_vote?.[l]],
  ];
}

const typeRow = (summary: EvalSummary): RankSummary | undefined =>
  summary.per_request_type && summary.per_request_type.found > 0 ? summary.per_request_type : undefined;

export function formatSummary(summary: EvalSummary, levels: Level[]): string {
  const lines = [`${'scope'.padEnd(LABEL)}${figuresHead()}`];
  for (const l of levels) {
    for (const [label, s] of scopes(summary, l)) if (s) lines.push(`${label.padEnd(LABEL)}${figures(s)}`);
  }
  const type = typeRow(summary);
  if (type) lines.push(`${'fault type, service right'.padEnd(LABEL)}${figures(type)}`);
  if (summary.faults_without_cases.length) {
    lines.push(`faults without cases (not scored): ${summary.faults_without_cases.join(', ')}`);
  }
  return lines.join('\n');
}

/** Several policies' evaluations on the same cases in one table: per scope, one row per policy. */
export function formatComparison(results: { policy: string; summary: EvalSummary }[], levels: Level[]): string {
  const width = Math.max(6, ...results.map((r) => r.policy.length)) + 2;
  const lines = [`${'scope'.padEnd(LABEL)}${'policy'.padEnd(width)}${figuresHead()}`];
  for (const l of levels) {
    for (let i = 0; i < SCOPES; i++) {
      for (const r of results) {
        const [label, s] = scopes(r.summary, l)[i];
        if (s) lines.push(`${label.padEnd(LABEL)}${r.policy.padEnd(width)}${figures(s)}`);
      }
    }
  }
  for (const r of results) {
    const type = typeRow(r.summary);
    if (type) lines.push(`${'fault type, service right'.padEnd(LABEL)}${r.policy.padEnd(width)}${figures(type)}`);
  }
  const without = results[0]?.summary.faults_without_cases ?? [];
  if (without.length) lines.push(`faults without cases (not scored): ${without.join(', ')}`);
  return lines.join('\n');
}
