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
  /**
   * D_max of ThinkFL Algorithm 1 (`rot`): tool turns before the forced print_results turn; the route
   * grader (Eq. 10) and the scripted expert read the same value. At most 20 (ThinkFL Sec. 6.3). Default 10 (ThinkFL Sec. 5.1.4).
   */
  d_max: z
    .number()
    .int()
    .min(1)
    .max(MAX_TOOL_TURNS)
    .default(10)
    .describe(
      'D_max of ThinkFL Algorithm 1 (rot): tool turns before the forced print_results turn; the route grader (Eq. 10) and the ' +
        'scripted expert read the same value. Integer 1 to 20 (ThinkFL Sec. 6.3 caps tool rounds at 20). Default 10 (ThinkFL Sec. 5.1.4).',
    ),
  /**
   * `rot`: end each exploration turn's observation with how many tool turns are left
   * ("[3 tool turns left]"), so a small model need not count turns to answer in time. Default false.
   */
  turns_left_note: z
    .boolean()
    .default(false)
    .describe(
      '`rot`: end each exploration turn\'s observation with how many tool turns are left ("[3 tool turns left]"), so a small model need not count turns to answer in time. Default false.',
    ),
  /** Tools offered on `rot`'s exploration turns (ThinkFL Algorithm 1's A, plus search_logs); print_results must be among them. */
  tools: z
    .array(z.string().min(1))
    .min(1)
    .default(['search_traces', 'search_fluctuating_metrics', 'search_logs', 'print_results'])
    .refine((t) => t.every((n) => getTool(n)), { message: `unknown tool; known tools: ${toolNames().join(', ')}` })
    .refine((t) => t.includes('print_results'), { message: 'tools must include print_results' })
    .describe(
      "Tools offered on rot's exploration turns (ThinkFL Algorithm 1's A: traces, metrics, print; plus the project's search_logs); " +
        'print_results must be among them. Default search_traces, search_fluctuating_metrics, search_logs, print_results.',
    ),
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
        .refine((t) => t.includes('print_results'), { message: 'tools must include print_results' })
        .describe(
          "Tools of RCLAgent's agents, A: trace, metric and format (the paper has no log agent). Phase 1 offers them without the metrics tool. Default search_traces, search_fluctuating_metrics, print_results.",
        ),
      /** Turns of phase 1, initial reasoning (RCLAgent Eq. 6; no metrics tool). The paper gives no budget. Default 4. */
      initial_turns: z
        .number()
        .int()
        .min(1)
        .max(MAX_TOOL_TURNS)
        .default(4)
        .describe('Turns of phase 1, initial reasoning (RCLAgent Eq. 6; no metrics tool). The paper gives no budget. Default 4.'),
      /** Turns of phase 2, critical reflection (RCLAgent Eq. 7), which must go deeper before answering. The paper gives no budget. Default 6. */
      reflection_turns: z
        .number()
        .int()
        .min(1)
        .max(MAX_TOOL_TURNS)
        .default(6)
        .describe(
          'Turns of phase 2, critical reflection (RCLAgent Eq. 7), which must go deeper before answering. The paper gives no budget. Default 6.',
        ),
    })
    .refine((r) => r.initial_turns + r.reflection_turns <= MAX_TOOL_TURNS, {
      message: `initial_turns + reflection_turns must be at most ${MAX_TOOL_TURNS}`,
    })
    .prefault({})
    .describe('The rclagent protocol (RCLAgent, multi-agent recursion of thought): its tools and phase budgets, which sum to at most 20.'),
  /** `oracl`: the environment's sketch of the request (ORACL's data collector; UNSPEC constants). */
  oracl: z
    .object({
      /** |deviation| in sigmas from which a metric is binned Medium. Default 1. */
      medium_sigma: z
        .number()
        .positive()
        .default(1)
        .describe(
          "|deviation| from the usual mean, in the usual standard deviations, from which a metric is binned Medium (ORACL's Low/Medium/High bins). Default 1.",
        ),
      /** |deviation| in sigmas from which a metric is binned High (the tools' n-sigma band). Default 3. */
      high_sigma: z
        .number()
        .positive()
        .default(3)
        .describe(
          "|deviation| in standard deviations from which a metric is binned High (the tools' n-sigma band); above medium_sigma. Default 3.",
        ),
      /** Most pods of the trace described in the sketch. Default 20. */
      max_pods: z.number().int().min(1).default(20).describe('Most pods of the trace described in the sketch. Default 20.'),
      /** Most error/warning log templates listed per pod. Default 5. */
      max_templates: z.number().int().min(0).default(5).describe('Most error/warning log templates listed per pod. Default 5.'),
    })
    .refine((o) => o.high_sigma > o.medium_sigma, { message: 'high_sigma must exceed medium_sigma', path: ['high_sigma'] })
    .prefault({})
    .describe(
      "The oracl protocol: the environment's sketch of the request (ORACL's data collector, Sec. IV-A). The paper gives none of these constants; the defaults are the project's.",
    ),
  /** `knowledgemind`: KnowledgeMind's MCTS (../shared/seeds/003 Alg. 2; every constant UNSPEC there). */
  knowledgemind: z
    .object({
      /** MCTS rounds (selection, expansion, simulation, back propagation); each asks the policy up to twice. Default 6. */
      simulations: z
        .number()
        .int()
        .min(1)
        .max(9)
        .default(6)
        .describe(
          'N of KnowledgeMind Alg. 2: MCTS rounds (selection, expansion, simulation, back propagation); each asks the policy up to twice. 1 to 9. Default 6.',
        ),
      /** C of UCT(v) = Q/N + C sqrt(ln N(parent) / N). Default sqrt(2). */
      exploration: z
        .number()
        .nonnegative()
        .default(Math.SQRT2)
        .describe('C of UCT(v) = Q/N + C sqrt(ln N(parent) / N) (KnowledgeMind Alg. 2). Default sqrt(2).'),
      /** A log template alarms when new or at least this many times its usual rate. Default 3. */
      log_ratio: z
        .number()
        .positive()
        .default(3)
        .describe('A log template alarms when new or at least this many times its usual rate. Default 3.'),
      /** A metric series alarms beyond this many sigmas of its usual band. Default 5. */
      metric_sigma: z
        .number()
        .positive()
        .default(5)
        .describe('A metric series alarms beyond this many standard deviations of its usual band. Default 5.'),
      /** Fault ids of the training split that form the case library (never the case's own fault). Default none (rules only, as the paper's comparison). */
      kb_faults: z
        .array(z.string().min(1))
        .default([])
        .describe(
          "Fault ids of the training split that form the case library (never the case's own fault). Default none (rules only, as the paper's comparison).",
        ),
      /** Library cases compared by Jaccard over alarm sets. Default 3. */
      kb_top_k: z.number().int().min(1).default(3).describe('Library cases compared by Jaccard over alarm sets. Default 3.'),
      /** Jaccard from which a library case is a full match (the model's judgement in the paper). Default 1. */
      kb_full_match: z
        .number()
        .gt(0)
        .max(1)
        .default(1)
        .describe(
          "Jaccard similarity from which a library case is a full match, which ends the search (the model's judgement in the paper). Default 1.",
        ),
    })
    .prefault({})
    .describe(
      "The knowledgemind protocol: KnowledgeMind's MCTS over the fault mining tree (Alg. 2). The paper gives none of these constants; the defaults are the project's.",
    ),
  /** `rcaflow`: RCAFlow's behaviour-tree execution (../shared/seeds/004). */
  rcaflow: z
    .object({
      /** theta: re-plan when the policy's confidence is at most this. Default 0.90 (RCAFlow). */
      theta: z
        .number()
        .min(0)
        .max(1)
        .default(0.9)
        .describe(
          "theta of RCAFlow's coordinator: re-plan (insert a step) when the policy's confidence after a Selector or a branch is at most this. Default 0.90 (RCAFlow).",
        ),
      /** A log template makes a logs step succeed when new or at least this many times its usual rate. Default 3. */
      log_ratio: z
        .number()
        .positive()
        .default(3)
        .describe('A log template makes a logs step succeed when new or at least this many times its usual rate. Default 3.'),
      /** The workflow (behaviour tree as JSON, see rcaflow/tree.ts); default: the OpenRCA RCA-agent rules over the project's tools. */
      workflow: WorkflowSchema.optional().describe(
        "The workflow (behaviour tree as JSON, see rcaflow/tree.ts); default: the OpenRCA RCA-agent rules over the project's tools.",
      ),
    })
    .prefault({})
    .describe("The rcaflow protocol: RCAFlow's behaviour-tree workflows, run on a branch stack."),
  /** Settings of the tools (thresholds, windows, observation bounds, span aliases). */
  tool_settings: ToolSettingsSchema.default(ToolSettingsSchema.parse({})).describe(
    'Settings of the tools (thresholds, windows, observation bounds, span aliases), for every protocol.',
  ),
});

export type EpisodeSettings = z.infer<typeof EpisodeSettingsSchema>;

/** Parses episode settings; errors name the offending key under `path` (e.g. "env.episode"). */
export function parseEpisodeSettings(input: unknown, path = 'episode'): EpisodeSettings {
  const r = EpisodeSettingsSchema.safeParse(input ?? {});
  if (r.success) return r.data;
  throw new Error(`invalid episode settings: ${formatZodIssues(r.error, path)}`);
}
