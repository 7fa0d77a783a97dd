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
    answer_tool: z.string().min(1).default('print_results'),
    recall: recallSettings.prefault({}),
    reciprocal_rank: reciprocalRankSettings.prefault({}),
    route: routeSettings.prefault({}),
    hallucination: hallucinationSettings.prefault({}),
    multi_factor: multiFactorSettings.prefault({}),
    diversity: diversitySettings.prefault({}),
    oracl: oraclSettings.prefault({}),
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
