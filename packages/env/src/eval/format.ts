/** Plain-text table of an evaluation, as `trainer-ctl eval` prints it. */
import type { Level } from '../types';
import type { EvalSummary } from './evaluate';
import { RECALL_KS, type RankSummary } from './metrics';

const pct = (x: number): string => (100 * x).toFixed(2).padStart(7);

function row(label: string, s: RankSummary): string {
  const recalls = RECALL_KS.map((k) => pct(s.recall[k] ?? 0)).join(' ');
  return `${label.padEnd(26)}${String(s.n).padStart(6)} ${recalls} ${s.mrr.toFixed(4).padStart(7)} ${s.mrrTop10.toFixed(4).padStart(9)}`;
}

export function formatSummary(summary: EvalSummary, levels: Level[]): string {
  const head = `${'scope'.padEnd(26)}${'n'.padStart(6)} ${RECALL_KS.map((k) => `R@${k}`.padStart(7)).join(' ')} ${'MRR'.padStart(7)} ${'MRR@10'.padStart(9)}`;
  const lines = [head];
  for (const l of levels) {
    if (summary.perRequest[l]) lines.push(row(`per request, ${l}`, summary.perRequest[l]));
    if (summary.perFault[l]) lines.push(row(`per fault, ${l}`, summary.perFault[l]));
    if (summary.perFaultVote?.[l]) lines.push(row(`per fault by vote, ${l}`, summary.perFaultVote[l]));
    if (summary.perBatchVote?.[l]) lines.push(row(`per 10-batch vote, ${l}`, summary.perBatchVote[l]));
  }
  if (summary.perRequestType && summary.perRequestType.found > 0) lines.push(row('fault type, service right', summary.perRequestType));
  if (summary.faultsWithoutCases.length) {
    lines.push(`faults without cases (not scored): ${summary.faultsWithoutCases.join(', ')}`);
  }
  return lines.join('\n');
}
