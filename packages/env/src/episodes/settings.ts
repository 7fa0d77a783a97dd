/** Settings of episode protocols: turn budgets, tools offered, and the tools' own settings. */
import { z } from 'zod';
import '../tools/builtin';
import { getTool, toolNames } from '../tools/registry';
import { ToolSettingsSchema } from '../tools/settings';
import { WorkflowSchema } from './rcaflow/tree';
import { formatZodIssues } from '../zod-issues';

/** Hard cap on tool turns of any protocol (ThinkFL: D_max up to 20). */
export const MAX_TOOL_TURNS = 20;

export const EpisodeSettingsSchema = z.object({
  /** D_max of ThinkFL Algorithm 1 (`rot`): tool turns before the forced print_results turn. Default 10, at most 20. */
  d_max: z.number().int().min(1).max(MAX_TOOL_TURNS).default(10),
  /**
   * `rot`: end each exploration turn's observation with how many tool turns are left
   * ("[3 tool turns left]"), so a small model need not count turns to answer in time. Default false.
   */
  turns_left_note: z.boolean().default(false),
  /** Tools offered on exploration turns; print_results must be among them. */
  tools: z
    .array(z.string().min(1))
    .min(1)
    .default(['search_traces', 'search_fluctuating_metrics', 'search_logs', 'print_results'])
    .refine((t) => t.every((n) => getTool(n)), { message: `unknown tool; known tools: ${toolNames().join(', ')}` })
    .refine((t) => t.includes('print_results'), { message: 'tools must include print_results' }),
  /** Phase budgets and agents of `rclagent` (RCLAgent); the budgets sum to at most 20. */
  rclagent: z
    .object({
      /**
       * Tools of RCLAgent's agents, A: trace, metric and format (the paper has no log agent).
       * Phase 1 offers them without the metrics tool. Default search_traces, search_fluctuating_metrics, print_results.
       */
      tools: z
        .array(z.string().min(1))
        .default(['search_traces', 'search_fluctuating_metrics', 'print_results'])
        .refine((t) => t.every((n) => getTool(n)), { message: `unknown tool; known tools: ${toolNames().join(', ')}` })
        .refine((t) => t.includes('print_results'), { message: 'tools must include print_results' }),
      /** Turns of the initial reasoning phase (no metrics tool). Default 4. */
      initial_turns: z.number().int().min(1).max(MAX_TOOL_TURNS).default(4),
      /** Turns of the critical reflection phase, which must go deeper before answering. Default 6. */
      reflection_turns: z.number().int().min(1).max(MAX_TOOL_TURNS).default(6),
    })
    .refine((r) => r.initial_turns + r.reflection_turns <= MAX_TOOL_TURNS, {
      message: `initial_turns + reflection_turns must be at most ${MAX_TOOL_TURNS}`,
    })
    .prefault({}),
  /** `oracl`: the environment's sketch of the request (ORACL's data collector; UNSPEC constants). */
  oracl: z
    .object({
      /** |deviation| in sigmas from which a metric is binned Medium. Default 1. */
      medium_sigma: z.number().positive().default(1),
      /** |deviation| in sigmas from which a metric is binned High (the tools' n-sigma band). Default 3. */
      high_sigma: z.number().positive().default(3),
      /** Most pods of the trace described in the sketch. Default 20. */
      max_pods: z.number().int().min(1).default(20),
      /** Most error/warning log templates listed per pod. Default 5. */
      max_templates: z.number().int().min(0).default(5),
    })
    .refine((o) => o.high_sigma > o.medium_sigma, { message: 'high_sigma must exceed medium_sigma', path: ['high_sigma'] })
    .prefault({}),
  /** `knowledgemind`: KnowledgeMind's MCTS (../shared/seeds/003 Alg. 2; every constant UNSPEC there). */
  knowledgemind: z
    .object({
      /** MCTS rounds (selection, expansion, simulation, back propagation); each asks the policy up to twice. Default 6. */
      simulations: z.number().int().min(1).max(9).default(6),
      /** C of UCT(v) = Q/N + C sqrt(ln N(parent) / N). Default sqrt(2). */
      exploration: z.number().nonnegative().default(Math.SQRT2),
      /** A log template alarms when new or at least this many times its usual rate. Default 3. */
      log_ratio: z.number().positive().default(3),
      /** A metric series alarms beyond this many sigmas of its usual band. Default 5. */
      metric_sigma: z.number().positive().default(5),
      /** Fault ids of the training split that form the case library (never the case's own fault). Default none (rules only, as the paper's comparison). */
      kb_faults: z.array(z.string().min(1)).default([]),
      /** Library cases compared by Jaccard over alarm sets. Default 3. */
      kb_top_k: z.number().int().min(1).default(3),
      /** Jaccard from which a library case is a full match (the model's judgement in the paper). Default 1. */
      kb_full_match: z.number().gt(0).max(1).default(1),
    })
    .prefault({}),
  /** `rcaflow`: RCAFlow's behaviour-tree execution (../shared/seeds/004). */
  rcaflow: z
    .object({
      /** theta: re-plan when the policy's confidence is at most this. Default 0.90 (RCAFlow). */
      theta: z.number().min(0).max(1).default(0.9),
      /** A log template makes a logs step succeed when new or at least this many times its usual rate. Default 3. */
      log_ratio: z.number().positive().default(3),
      /** The workflow (behaviour tree as JSON, see rcaflow/tree.ts); default: the OpenRCA RCA-agent rules over the project's tools. */
      workflow: WorkflowSchema.optional(),
    })
    .prefault({}),
  /** Settings of the tools (thresholds, windows, observation bounds, span aliases). */
  tool_settings: ToolSettingsSchema.default(ToolSettingsSchema.parse({})),
});

export type EpisodeSettings = z.infer<typeof EpisodeSettingsSchema>;

/** Parses episode settings; errors name the offending key under `path` (e.g. "env.episode"). */
export function parseEpisodeSettings(input: unknown, path = 'episode'): EpisodeSettings {
  const r = EpisodeSettingsSchema.safeParse(input ?? {});
  if (r.success) return r.data;
  throw new Error(`invalid episode settings: ${formatZodIssues(r.error, path)}`);
}
