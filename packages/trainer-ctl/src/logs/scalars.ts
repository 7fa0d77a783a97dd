/**
 * A run's figures as named scalars, one naming for TensorBoard, the HTML report and run.expect:
 * a metrics line's numeric fields as `<stage>/<path>` (GRPO steps), `sft/<path>` (SFT updates)
 * or `track/<path>` (training cases played greedily, logging.track), e.g. `priming/reward/mean`,
 * `exploration/graders/diversity/mean`, `sft/train/loss`, `track/perRequest/service/mrr`; an
 * evaluation's figures as `eval/<name>/<field>`, e.g. `eval/priming/formatValid`,
 * `eval/refinement/perFaultVote/service/mrr`, `eval/sft/perRequest/pod/R@3`.
 * A null where a number belongs is a non-finite value (JSON has no NaN): it becomes NaN.
 */
import type { EvalSummary } from '@thinkfl/env';

/** A metrics.jsonl line (controller/metrics-log.ts writes them). */
type MetricsRecord = Record<string, unknown> & { kind: 'sft' | 'grpo' | 'track' };

/** Fields that identify a line rather than measure it. */
const IDENTITY = new Set(['kind', 'stage', 'step', 'update', 'of', 'policyVersion', 'at']);

function flatten(value: unknown, path: string, out: Record<string, number>): void {
  if (typeof value === 'number') out[path] = value;
  else if (value === null) out[path] = Number.NaN;
  else if (typeof value === 'object' && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) flatten(v, `${path}/${k}`, out);
  }
}

/** The scalar series prefix of a metrics line: its stage for GRPO steps, `sft` for SFT updates, `track` for tracking points. */
export function seriesPrefix(m: MetricsRecord): string {
  return m.kind === 'grpo' ? String(m.stage) : m.kind;
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

/** An evaluation's figures by path (`formatValid`, `perRequest/service/mrr`, `perFault/pod/R@3`, ...). */
export function evalFigures(e: Omit<EvalFigures, 'name'>): Record<string, number> {
  const out: Record<string, number> = { formatValid: e.formatValid, answered: e.answered, toolCalls: e.toolCalls };
  for (const scope of ['perRequest', 'perFault', 'perFaultVote'] as const) {
    for (const [level, s] of Object.entries(e.summary[scope] ?? {})) {
      if (!s) continue;
      for (const [k, r] of Object.entries(s.recall)) out[`${scope}/${level}/R@${k}`] = r;
      out[`${scope}/${level}/mrr`] = s.mrr;
    }
  }
  return out;
}

export function evalScalars(e: EvalFigures): Record<string, number> {
  return Object.fromEntries(Object.entries(evalFigures(e)).map(([k, v]) => [`eval/${e.name}/${k}`, v]));
}
