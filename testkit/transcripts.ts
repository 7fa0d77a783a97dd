/**
 * Every message of the scripted agents' episodes on a few real cases, as a model reads them
 * (scripts/transcripts.ts pins them, packages/env/test/transcripts.test.ts compares).
 */
import { runEpisode } from '../packages/env/src/episodes/index';
import { getPolicy, parsePolicySettings, policyNames } from '../packages/env/src/policies/index';
import type { Dataset } from '../packages/env/src/types';

export interface Transcript {
  case_id: string;
  policy: string;
  protocol: string;
  tool_settings: Record<string, unknown>;
  messages: { role: string; content: string }[];
}

/** Tool settings played: the defaults, and every switch that rewrites names or adds verdicts. */
const VARIANTS: Record<string, unknown>[] = [{}, { span_aliases: true, pod_aliases: true, verdicts: true }];

/** The first case of every seventh fault that has cases: different services and fault types. */
export function transcriptCases(ds: Dataset) {
  const faults = ds.faults.filter((f) => ds.cases.some((c) => c.fault_id === f.id));
  return faults.filter((_, i) => i % 7 === 0).map((f) => ds.cases.find((c) => c.fault_id === f.id)!);
}

export async function transcripts(ds: Dataset): Promise<Transcript[]> {
  const out: Transcript[] = [];
  for (const kase of transcriptCases(ds)) {
    for (const name of policyNames()) {
      const def = getPolicy(name);
      if (def.kind !== 'agent') continue;
      const protocol = def.protocol ?? 'rot';
      for (const tool_settings of VARIANTS) {
        const policy = def.create(ds, parsePolicySettings(def, {}));
        const ep = await runEpisode({ dataset: ds, case: kase, policy, protocol, settings: { tool_settings } });
        out.push({
          case_id: kase.id,
          policy: name,
          protocol,
          tool_settings,
          messages: ep.messages.map((m) => ({ role: m.role, content: m.content })),
        });
      }
    }
  }
  return out;
}
