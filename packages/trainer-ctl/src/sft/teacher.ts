/**
 * Teacher conversations for stage-1 SFT: the scripted expert plays the `rot` protocol on
 * training cases (optionally with detours, several variants per case), and only episodes
 * whose answer puts the true root cause first at service level are kept.
 */
import {
  createExpert,
  ExpertSettingsSchema,
  parseEpisodeSettings,
  rankOfTruth,
  runEpisode,
  type Case,
  type Dataset,
  type EpisodeRecord,
  type Policy,
  type ToolSpec,
} from '@thinkfl/env';
import { DetourPolicy, DetourSettingsSchema, type DetourSettingsInput } from './detours';

export interface TeacherOptions {
  dataset: Dataset;
  cases: readonly Case[];
  /** Episode settings (D_max, tools, tool settings such as spanAliases). */
  episode?: Record<string, unknown>;
  /** Settings of the scripted expert; its dMax defaults to the episode's. */
  expert?: Record<string, unknown>;
  /** Detours in the conversations; absent: the expert's own conversations only. */
  detours?: DetourSettingsInput;
  /** Conversations played per case (each with its own detour seed). Default 1. */
  variants?: number;
  /** Seed of the detours. Default 0. */
  seed?: number;
  /**
   * Keep the expert's free text: the reasoning sentence before each call and the reasons in
   * its answer. false leaves the calls and the ranked components only: a tiny model then
   * learns the call format from a fifth of the tokens. Default true.
   */
  reasoning?: boolean;
}

export interface TeacherEpisode {
  case: Case;
  record: EpisodeRecord;
  /** Tools offered on the first turn (rendered into the prompt by the chat template). */
  tools: ToolSpec[];
  /** Assistant turns that are detours: context for the model, never trained on. */
  untrainedTurns: number[];
}

export interface TeacherData {
  episodes: TeacherEpisode[];
  /** Conversations played, and how many of them answered correctly. */
  played: number;
  correct: number;
}

/** The answer names the true root cause's service first (evaluation's service-level match). */
export function answeredCorrectly(dataset: Dataset, c: Case, record: EpisodeRecord): boolean {
  return rankOfTruth(record.answer, c.truth, 'service', dataset.topology) === 0;
}

/** The answer without the free-text `reason` of each root cause (the ranking is unchanged). */
function withoutReasons(call: string): string {
  const parsed = JSON.parse(call) as { name: string; arguments: { root_causes?: Record<string, unknown>[] } };
  if (parsed.name !== 'print_results' || !Array.isArray(parsed.arguments.root_causes)) return call;
  const root_causes = parsed.arguments.root_causes.map(({ reason: _reason, ...rest }) => rest);
  return JSON.stringify({ ...parsed, arguments: { ...parsed.arguments, root_causes } });
}

/**
 * The policy's messages without free text: the sentence before `<tool_call>` and the reasons
 * of a print_results answer are dropped, the call and the ranked components stay.
 */
export function callsOnly(policy: Policy): Policy {
  return {
    name: `${policy.name}-calls`,
    async next(ctx) {
      const m = await policy.next(ctx);
      const found = /<tool_call>\n([\s\S]*)\n<\/tool_call>/.exec(m.content);
      if (!found) return m;
      return { ...m, content: `<tool_call>\n${withoutReasons(found[1])}\n</tool_call>` };
    },
  };
}

export async function teacherEpisodes(opts: TeacherOptions): Promise<TeacherData> {
  const episode = parseEpisodeSettings(opts.episode ?? {});
  const expertSettings = ExpertSettingsSchema.parse({ dMax: episode.dMax, ...opts.expert });
  const detours = DetourSettingsSchema.parse(opts.detours ?? { rate: 0 });
  const variants = opts.variants ?? 1;
  if (!Number.isInteger(variants) || variants < 1) throw new Error(`variants must be a positive integer, got ${variants}`);
  const seed = opts.seed ?? 0;
  const out: TeacherData = { episodes: [], played: 0, correct: 0 };
  for (const [i, c] of opts.cases.entries()) {
    for (let v = 0; v < variants; v++) {
      const expert = createExpert(opts.dataset, expertSettings);
      const policy = new DetourPolicy(opts.reasoning === false ? callsOnly(expert) : expert, detours, seed + i * variants + v);
      const record = await runEpisode({ dataset: opts.dataset, case: c, policy, protocol: 'rot', settings: episode });
      out.played++;
      if (!answeredCorrectly(opts.dataset, c, record)) continue;
      out.correct++;
      out.episodes.push({ case: c, record, tools: policy.firstTools, untrainedTurns: policy.detourTurns });
    }
  }
  return out;
}
