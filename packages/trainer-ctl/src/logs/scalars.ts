/**
 * A run's figures as named scalars, one naming for TensorBoard, the HTML report and run.expect:
 * a metrics line's numeric fields as `<stage>/<path>` (GRPO steps), `sft/<path>` (SFT updates)
 * or `track/<path>` (training cases played greedily, logging.track), e.g. `priming/reward/mean`,
 * `exploration/graders/diversity/mean`, `sft/train/loss`, `track/per_request/service/mrr`; an
 * evaluation's figures as `eval/<name>/<field>`, e.g. `eval/priming/format_valid`,
 * `eval/refinement/per_fault_vote/service/mrr`, `eval/sft/per_request/pod/R@3`. Every name is
 * snake_case, as the keys of the files it comes from.
 * A null where a number belongs is a non-finite value (JSON has no NaN): it becomes NaN.
 */
import type { EvalSummary } from '@thinkfl/env';

/** A metrics.jsonl line (run-files/metrics-log.ts writes them). */
type MetricsRecord = Record<string, unknown> & { kind: 'sft' | 'grpo' | 'track' };

/** Fields that identify a line rather than measure it. */
const IDENTITY = new Set(['kind', 'stage', 'step', 'update', 'of', 'policy_version', 'at']);

function flatten(value: unknown, path: string, out: Record<string, number>): void {
  if (typeof value === 'number') out[path] = value;
  else if (value === null) out[path] = Number.NaN;
  else if (typeof value === 'object' && !Array.isArray(value)) {
    for (const [k, v] of Object.entries(value)) flatten(v, `${path}/${k}`, out);
  }
}

/**
 * The current name of a series written under an older, camelCase name (`eval/priming/formatValid`
 * is `eval/priming/format_valid`, `eval/refinement/perFault/service/mrr` is
 * `eval/refinement/per_fault/service/mrr`); a current name is returned as it is (`R@1` included).
 */
export function currentSeriesName(name: string): string {
  return name
    .split('/')
    .map((seg) => seg.replace(/([a-z0-9])([A-Z])/g, (_, a: string, b: string) => `${a}_${b.toLowerCase()}`))
    .join('/');
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
  format_valid: number;
  answered: number;
  tool_calls: number;
  /** Absent in evaluations written before it existed. */
  format_valid_by_type?: Record<string, { format_valid: number }>;
  summary: Partial<Pick<EvalSummary, 'per_request' | 'per_fault' | 'per_fault_vote'>>;
}

/** An evaluation's figures by path (`format_valid`, `format_valid_by_type/exception`, `per_request/service/mrr`, `per_fault/pod/R@3`, ...). */
export function evalFigures(e: Omit<EvalFigures, 'name'>): Record<string, number> {
  const out: Record<string, number> = { format_valid: e.format_valid, answered: e.answered, tool_calls: e.tool_calls };
  for (const [type, t] of Object.entries(e.format_valid_by_type ?? {})) out[`format_valid_by_type/${type}`] = t.format_valid;
  for (const scope of ['per_request', 'per_fault', 'per_fault_vote'] as const) {
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
