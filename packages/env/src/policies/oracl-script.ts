/**
 * `oracl-script`: a scripted stand-in for ORACL's model on the `oracl` protocol, reported as
 * "oracl-scripted", not as ORACL. It reads only the environment's sketch (PolicyContext.environment)
 * and scores each pod by rules over the sketch's bins; its <think>/<Fault>/<Counterfactual> text
 * is templated and says so. The fault type comes from which evidence dominates.
 */
import { z } from 'zod';
import type { OraclSketch, SketchPod } from '../episodes/sketch';
import type { AssistantMessage, Policy, PolicyContext } from '../types';
import { registerPolicy } from './registry';

export const OraclScriptSettingsSchema = z.object({
  /** Score per metric in the High bin. Default 2. */
  high_weight: z.number().nonnegative().default(2),
  /** Score per metric in the Medium bin. Default 0.25. */
  medium_weight: z.number().nonnegative().default(0.25),
  /** Score per error log template new to the service. Default 3. */
  new_error_weight: z.number().nonnegative().default(3),
  /** Score per error log template at or above risen_ratio times its usual rate. Default 1. */
  risen_error_weight: z.number().nonnegative().default(1),
  /** Rate over the usual rate from which a template counts as risen. Default 3. */
  risen_ratio: z.number().positive().default(3),
  /** Score of the pod with the largest own delay (others in proportion). Default 3. */
  delay_weight: z.number().nonnegative().default(3),
  /** Score per changed usual call (missing or unusual) below the pod's spans. Default 0.5. */
  pattern_weight: z.number().nonnegative().default(0.5),
  /** Type named when CPU metrics are High. Default cpu_contention (Nezha's label). */
  type_cpu: z.string().min(1).default('cpu_contention'),
  /** Type named when memory metrics are High. Default memory_contention. */
  type_memory: z.string().min(1).default('memory_contention'),
  /** Type named when error logs or error spans dominate. Default exception (Nezha's label). */
  type_error: z.string().min(1).default('exception'),
  /** Type named when only the call pattern changed. Default return (Nezha's label). */
  type_pattern: z.string().min(1).default('return'),
  /** Type named when only delay shows. Default network_delay. */
  type_delay: z.string().min(1).default('network_delay'),
  /** Most root causes in <root>. Default 5. */
  max_answers: z.number().int().min(1).default(5),
});
export type OraclScriptSettings = z.infer<typeof OraclScriptSettingsSchema>;

interface Scored {
  pod: SketchPod;
  score: number;
  type: string;
  why: string[];
}

function judge(p: SketchPod, maxDelay: number, s: OraclScriptSettings): Scored {
  const high = p.metrics.filter((m) => m.bin === 'High');
  const medium = p.metrics.filter((m) => m.bin === 'Medium');
  const errors = p.logs.filter((l) => l.level === 'error');
  const fresh = errors.filter((l) => l.unseen).length;
  const risen = errors.filter((l) => !l.unseen && (l.ratio ?? 0) >= s.risen_ratio).length;
  const delay = maxDelay > 0 ? Math.max(0, p.ownExcessUs) / maxDelay : 0;
  const pattern = p.missingCalls.length + p.addedCalls.length;
  const parts = {
    metric: s.high_weight * high.length + s.medium_weight * medium.length,
    error: s.new_error_weight * fresh + s.risen_error_weight * risen + (p.errorSpans ? s.new_error_weight : 0),
    delay: s.delay_weight * delay,
    pattern: s.pattern_weight * pattern,
  };
  const why: string[] = [];
  if (high.length)
    why.push(
      `High metrics ${high
        .slice(0, 3)
        .map((m) => m.metric)
        .join(', ')}`,
    );
  if (fresh || risen) why.push(`${fresh} new and ${risen} risen error log templates`);
  if (delay > 0.2) why.push(`own delay ${(p.ownExcessUs / 1000).toFixed(1)} ms`);
  if (pattern) why.push(`${pattern} changed call(s) below it`);
  const cpu = high.some((m) => /cpu/i.test(m.metric));
  const mem = high.some((m) => /mem/i.test(m.metric));
  const type =
    cpu && parts.metric >= parts.error
      ? s.type_cpu
      : mem && parts.metric >= parts.error
        ? s.type_memory
        : parts.error > 0
          ? s.type_error
          : pattern > 0
            ? s.type_pattern
            : delay > 0
              ? s.type_delay
              : s.type_error;
  return { pod: p, score: parts.metric + parts.error + parts.delay + parts.pattern, type, why };
}

export function oraclScriptAnswer(sketch: OraclSketch, s: OraclScriptSettings): string {
  const maxDelay = Math.max(0, ...sketch.pods.map((p) => p.ownExcessUs));
  const ranked = sketch.pods
    .map((p) => judge(p, maxDelay, s))
    .sort((a, b) => b.score - a.score || b.pod.id - a.pod.id)
    .slice(0, s.max_answers);
  const top = ranked[0];
  const think = top
    ? `(templated) ${top.pod.service} scores highest: ${top.why.join('; ') || 'it is the deepest pod on the path'}.`
    : '(templated) The sketch lists no pod.';
  const fault = ranked.map((r) => `${r.pod.pod}: ${r.type} (score ${r.score.toFixed(2)})`).join('\n');
  const counter = ranked
    .slice(1)
    .map(
      (r) =>
        `(templated) Without a fault in ${r.pod.service}, its evidence (${r.why.join('; ') || 'none'}) would remain; it ranks below ${top!.pod.service}.`,
    )
    .join('\n');
  const root = ranked.map((r) => `${r.pod.pod} | ${r.type}`).join('\n');
  return `<think>${think}</think>\n<Fault>${fault || 'none'}</Fault>\n<Counterfactual>${counter || '(templated) no alternative candidate'}</Counterfactual>\n<root>${root}</root>`;
}

export function createOraclScript(settings: OraclScriptSettings): Policy {
  return {
    name: 'oracl-script',
    async next(ctx: PolicyContext): Promise<AssistantMessage> {
      const sketch = ctx.environment as OraclSketch | undefined;
      if (!sketch || !Array.isArray(sketch.pods)) throw new Error('oracl-script plays the oracl protocol only (no sketch in the context)');
      return { content: oraclScriptAnswer(sketch, settings) };
    },
  };
}

registerPolicy({
  name: 'oracl-script',
  kind: 'agent',
  protocol: 'oracl',
  description: 'ORACL-scripted: bin rules over the oracl sketch, templated tagged answer (a stand-in, not ORACL)',
  settings: OraclScriptSettingsSchema,
  create: (_dataset, settings) => createOraclScript(settings),
});
