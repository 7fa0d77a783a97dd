/** Which cases an evaluation runs on when it is limited. */
import type { Case } from '../types';

/**
 * The first `limit` cases taken round-robin across faults (in dataset order within each
 * fault), so a small limit still covers as many faults as it can.
 */
export function spreadCases(cases: Case[], limit?: number): Case[] {
  if (limit === undefined || limit >= cases.length) return cases;
  const byFault = new Map<string, Case[]>();
  for (const c of cases) {
    const list = byFault.get(c.fault_id);
    if (list) list.push(c);
    else byFault.set(c.fault_id, [c]);
  }
  const queues = [...byFault.values()];
  const out: Case[] = [];
  for (let round = 0; out.length < limit; round++) {
    for (const q of queues) {
      if (round < q.length && out.length < limit) out.push(q[round]);
    }
  }
  return out;
}
