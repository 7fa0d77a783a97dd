/**
 * KnowledgeMind's case library (../shared/seeds/003, simulation step 1): past faults of the
 * training split as (alarm set, root-cause service), matched by Jaccard over alarm sets. Only the
 * faults named in `kb_faults` enter it, and never the case's own fault (leave-fault-out). The
 * model's "full match" judgement becomes Jaccard >= kb_full_match. The default is no library,
 * as in the paper's rules-only comparison. Its reward is a search-time value, not a GRPO reward.
 */
import type { ToolSettings } from '../../tools/settings';
import type { Dataset } from '../../types';
import { alarmCount, serviceAlarms, type AlarmSettings } from './alarms';

export interface KnowledgeSettings extends AlarmSettings {
  kb_faults: string[];
  kb_top_k: number;
  kb_full_match: number;
}

export interface KnowledgeCase {
  faultId: string;
  alarms: Set<string>;
  service: string;
}

const cache = new WeakMap<Dataset, Map<string, KnowledgeCase | null>>();

export function knowledgeBase(dataset: Dataset, tools: ToolSettings, s: KnowledgeSettings, exclude: string): KnowledgeCase[] {
  const byFault = cache.get(dataset) ?? new Map<string, KnowledgeCase | null>();
  cache.set(dataset, byFault);
  const out: KnowledgeCase[] = [];
  for (const id of s.kb_faults) {
    if (id === exclude) continue;
    const key = `${id}|${s.log_ratio}|${s.metric_sigma}`;
    if (!byFault.has(key)) {
      const fault = dataset.faults.find((f) => f.id === id);
      const first = dataset.cases.find((c) => c.fault_id === id);
      if (!fault) throw new Error(`episode.knowledgemind.kb_faults: unknown fault "${id}"`);
      const service = fault.truth.service;
      if (!first || !service) byFault.set(key, null);
      else {
        const alarms = new Set(
          [...serviceAlarms(dataset, first, tools, s).values()].filter((a) => alarmCount(a) > 0).map((a) => a.service),
        );
        byFault.set(key, { faultId: id, alarms, service });
      }
    }
    const k = byFault.get(key);
    if (k) out.push(k);
  }
  return out;
}

export function jaccard(a: Set<string>, b: Set<string>): number {
  if (a.size === 0 && b.size === 0) return 1;
  let inter = 0;
  for (const x of a) if (b.has(x)) inter++;
  return inter / (a.size + b.size - inter);
}

/** The best of the top-k cases by Jaccard, when it is a full match. */
export function matchKnowledge(kb: KnowledgeCase[], alarms: Set<string>, s: KnowledgeSettings): KnowledgeCase | undefined {
  const top = kb
    .map((k) => ({ k, j: jaccard(k.alarms, alarms) }))
    .sort((a, b) => b.j - a.j)
    .slice(0, s.kb_top_k);
  return top[0] && top[0].j >= s.kb_full_match ? top[0].k : undefined;
}
