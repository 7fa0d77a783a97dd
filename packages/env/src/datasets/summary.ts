/** Human-readable per-fault summary of an imported dataset (what `trainer-ctl import` prints). */
import type { Dataset } from '../types';
import { truthName } from './cases';
import { isoUs } from './time';

export function formatImportSummary(d: Dataset): string {
  const rows = d.faults.map((f) => {
    const remarks = f.case_count === 0 ? `no cases: ${f.no_case_reason ?? '?'}` : f.notes.filter((n) => n.startsWith('inject_')).join('; ');
    return [f.id, isoUs(f.start_us).slice(11, 19), f.type, truthName(f.truth), String(f.case_count), remarks];
  });
  const head = ['fault', 'start', 'type', 'truth', 'cases', 'remarks'];
  const width = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (i < 5 ? r[i].length : 0))));
  const line = (r: string[]) => r.map((c, i) => (i < 5 ? c.padEnd(width[i]) : c)).join('  ');
  const withCases = d.faults.filter((f) => f.case_count > 0).length;
  return [
    line(head),
    ...rows.map(line),
    `${d.faults.length} faults, ${withCases} with cases, ${d.cases.length} cases; ${d.traces.size} spans`,
  ].join('\n');
}
