/**
 * Settings of every grader, one section each, as they appear under `graders:` in a run
 * YAML. Every knob has a default, so `{}` is a complete configuration.
 */
import { z } from 'zod';
import { diversitySettings } from './grader-settings/diversity';
import { hallucinationSettings } from './grader-settings/hallucination';
import { multiFactorSettings } from './grader-settings/multi-factor';
import { recallSettings } from './grader-settings/recall';
import { reciprocalRankSettings } from './grader-settings/reciprocal-rank';
import { routeSettings } from './grader-settings/route';
import { oraclSettings } from './oracl/settings';
import { formatZodIssues } from '@thinkfl/env';

export const graderSettings = z
  .object({
    /** Name of the tool that delivers the final answer; its own result is not evidence. Default 'print_results'. */
    answer_tool: z
      .string()
      .min(1)
      .default('print_results')
      .describe("Name of the tool that delivers the final answer; its own result is not evidence. Default 'print_results'."),
    recall: recallSettings
      .prefault({})
      .describe('Recall grader, ThinkFL Eq. 9: R = 1 - r/r_max for the 0-based rank r of the true root cause.'),
    reciprocal_rank: reciprocalRankSettings
      .prefault({})
      .describe("Reciprocal-rank grader (the project's): 1/rank of the true root cause at a level, MRR (ThinkFL Eq. 13) as a reward."),
    route: routeSettings.prefault({}).describe('Route grader, ThinkFL Eq. 10: how early in the tool path the root cause appears.'),
    hallucination: hallucinationSettings
      .prefault({})
      .describe('Hallucination grader, ThinkFL Eq. 11: H = l1*N_inv/N + l2*N_dup/N over the N answered components.'),
    multi_factor: multiFactorSettings
      .prefault({})
      .describe('Multi-factor grader, ThinkFL Eq. 8: S = alpha*R + beta*P - gamma*H (recall, route, hallucination).'),
    diversity: diversitySettings
      .prefault({})
      .describe('Diversity grader, ThinkFL Algorithm 2: scores A > B > C for a new solving path, a new path, a seen path.'),
    oracl: oraclSettings
      .prefault({})
      .describe(
        "ORACL's graders (Eq. 5-11): pod match, F_beta, TP bonus, FN penalty, tag format, length. The paper gives none of the constants; the defaults are the project's.",
      ),
  })
  .strict();
export type GraderSettings = z.output<typeof graderSettings>;
export type GraderSettingsInput = z.input<typeof graderSettings>;

/** Parses grader settings; `yamlPath` is where they sit in the run config, for error messages. */
export function parseGraderSettings(input: unknown, yamlPath = 'graders'): GraderSettings {
  const r = graderSettings.safeParse(input ?? {});
  if (!r.success) throw new Error(`invalid grader settings:\n${formatZodIssues(r.error, yamlPath, { separator: '\n' })}`);
  return r.data;
}
