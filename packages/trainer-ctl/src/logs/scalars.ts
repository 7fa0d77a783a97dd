/**
 * A run's figures as named scalars, one naming for TensorBoard, the HTML report and run.expect:
 * a metrics line's numeric fields as `<stage>/<path>` (GRPO steps) or `sft/<path>` (SFT updates),
 * e.g. `priming/reward/mean`, `exploration/graders/diversity/mean`, `sft/train/loss`; an
 * evaluation's figures as `eval/<name>/<field>`, e.g. `eval/priming/formatValid`,
 * `eval/refinement/perFaultVote/service/mrr`, `eval/sft/perRequest/pod/R@3`.
 * A null where a number belongs is a non-finite value (JSON has no NaN): it becomes NaN.
 */
import type { EvalSummary } from '@thinkfl/env';

/** A metrics.jsonl line (controller/metrics-log.ts writes them). */
type MetricsRecord = Record<string, unknown> & { kind: 'sft' | 'grpo' };

/** Fields that identify a line rather than measure it. */
const IDENTITY = new Set(['kind', 'stage', 'step', 'update', 'of', 'policyVersion', 'at']);

function flatten(value: unknown, path: string, out: Record<string, number>): void {
  if (typeof value === 'number') out[path] = value;
  else if (value === null) out[path] = Number.NaN;
  else if (typeof value === 'object' && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) flatten(v, `${path}/${k}`, out);
  }
}

/** The scalar series prefix of a metrics line: its stage for GRPO steps, `sft` for SFT updates. */
export function seriesPrefix(m: MetricsRecord): string {
  return m.kind === 'sft' ? 'sft' : String(m.stage);
}

export function metricScalars(m: MetricsRecord): Record<string, number> {
  const out: Record<string, number> = {};
  const prefix = seriesPrefix(m);
  for (const [k, v] of Object.entries(m)) if (!IDENTITY.has(k)) flatten(v, `${prefix}/${k}`, out);
  return out;
}

/** The figures of an eval-<name>.json (controller/evaluation.ts writes them). */
export interface EvalFigures {
  name: string;
  formatValid: number;
  answered: number;
  toolCalls: number;
  summary: Partial<Pick<EvalSummary, 'perRequest' | 'perFault' | 'perFaultVote'>>;
}

export function evalScalars(e: EvalFigures): Record<string, number> {
  const p = `eval/${e.name}`;
  const out: Record<string, number> = { [`${p}/formatValid`]: e.formatValid, [`${p}/answered`]: e.answered, [`${p}/toolCalls`]: e.toolCalls };
  for (const scope of ['perRequest', 'perFault', 'perFaultVote'] as const) {
    for (const [level, s] of Object.entries(e.summary[scope] ?? {})) {
      if (!s) continue;
      for (const [k, r] of Object.entries(s.recall)) out[`${p}/${scope}/${level}/R@${k}`] = r;
      out[`${p}/${scope}/${level}/mrr`] = s.mrr;
    }
  }
  return out;
}
