/**
 * Teacher conversations for stage-1 SFT: the scripted expert plays the `rot` protocol on
 * training cases (optionally with detours, several variants per case), and only episodes
 * whose answer puts the true root cause first at service level are kept (all of them when the
 * answers are drawn at random: answerSpans 'random').
 */
import { parseEpisodeSettings } from '../episodes/settings';
import { runEpisode } from '../episodes/run-episode';
import { rankOfTruth } from '../eval/match';
import { createExpert, ExpertSettingsSchema } from '../policies/expert/expert';
import { Rng } from '../rng';
import { type SearchTracesData, type SpanSummary, VERDICTS, verdictOf } from '../tools/search-traces';
import type { Case, Dataset, EpisodeRecord, Policy, PolicyContext, ToolSpec } from '../types';
import { DetourPolicy, DetourSettingsSchema, type DetourSettingsInput } from './detours';

export interface TeacherOptions {
  dataset: Dataset;
  cases: readonly Case[];
  /** Episode settings (D_max, tools, tool settings such as span_aliases). */
  episode?: Record<string, unknown>;
  /** Settings of the scripted expert; it plays within the episode's d_max. */
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
  /**
   * Name each root cause of the answer by a span alias ({"span": "s4"}) instead of by service and
   * pod. 'teacher': the span of the expert's root cause, the most abnormal one seen of its pod.
   * 'random': as many spans as the expert answered, drawn at random (seeded) from the last
   * search_traces result, and every conversation is kept, right or wrong: the data teach the
   * protocol but not which span to answer, which is left to the reward (GRPO). Absent: by name.
   */
  answerSpans?: 'teacher' | 'random';
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

type RootCauseArgs = Record<string, unknown>;

/**
 * The policy's messages with the root causes of a print_results call rewritten by `f`; with
 * `callsOnly` the free text around the call is dropped too. Other messages are unchanged
 * (or, with `callsOnly`, reduced to their call).
 */
function rewriteAnswers(
  policy: Policy,
  suffix: string,
  f: (r: RootCauseArgs[], ctx: PolicyContext) => RootCauseArgs[],
  callsOnlyText = false,
): Policy {
  return {
    name: `${policy.name}-${suffix}`,
    async next(ctx) {
      const m = await policy.next(ctx);
      const found = /<tool_call>\n([\s\S]*)\n<\/tool_call>/.exec(m.content);
      if (!found) return m;
      const call = JSON.parse(found[1]) as { name: string; arguments: { root_causes?: RootCauseArgs[] } };
      const answer = call.name === 'print_results' && Array.isArray(call.arguments.root_causes);
      const text = answer
        ? JSON.stringify({ ...call, arguments: { ...call.arguments, root_causes: f(call.arguments.root_causes!, ctx) } })
        : found[1];
      return { ...m, content: callsOnlyText ? `<tool_call>\n${text}\n</tool_call>` : m.content.replace(found[1], () => text) };
    },
  };
}

/**
 * The policy's messages without free text: the sentence before `<tool_call>` and the reasons
 * of a print_results answer are dropped, the call and the ranked components stay.
 */
export function callsOnly(policy: Policy): Policy {
  return rewriteAnswers(policy, 'calls', (rs) => rs.map(({ reason: _reason, ...rest }) => rest), true);
}

/** Per pod (and service) the most abnormal span the search_traces results showed, the latest among equals. */
function spansShown(ctx: PolicyContext): { byPod: Map<string, SpanSummary>; byService: Map<string, SpanSummary> } {
  const byPod = new Map<string, SpanSummary>();
  const byService = new Map<string, SpanSummary>();
  const keep = (m: Map<string, SpanSummary>, key: string, s: SpanSummary) => {
    const had = m.get(key);
    if (!had || VERDICTS.indexOf(verdictOf(s)) <= VERDICTS.indexOf(verdictOf(had))) m.set(key, s);
  };
  for (const c of ctx.toolCalls) {
    if (c.name !== 'search_traces' || !c.observation.ok) continue;
    const d = c.observation.data as SearchTracesData;
    for (const s of [d.parent, ...d.children]) {
      // Keyed as the expert's answer names the pod: its alias with pod aliases on (PolicyContext.show).
      keep(byPod, ctx.show ? ctx.show(s.pod) : s.pod, s);
      keep(byService, s.service, s);
    }
  }
  return { byPod, byService };
}

/**
 * The policy's answers with each root cause named by a span: the most abnormal span seen of its
 * pod (else of its service; search_traces' verdicts). Root causes no span shows (a node) keep their names.
 */
export function answersBySpan(policy: Policy): Policy {
  return rewriteAnswers(policy, 'spans', (rs, ctx) => {
    const { byPod, byService } = spansShown(ctx);
    return rs.map((r) => {
      const span =
        (typeof r.pod === 'string' && byPod.get(r.pod)) || (typeof r.service === 'string' && byService.get(r.service)) || undefined;
      if (!span) return r;
      const { node: _n, service: _s, pod: _p, ...rest } = r;
      return { span: span.ref, ...rest };
    });
  });
}

/**
 * The policy's answers with each root cause replaced by a span drawn at random from the last
 * search_traces result (its parent and children, distinct spans, as many as the answer had).
 * An answer before any search_traces result is left as it is.
 */
export function answersAtRandom(policy: Policy, seed: number): Policy {
  const rng = new Rng(seed);
  return rewriteAnswers(policy, 'random-spans', (rs, ctx) => {
    const last = ctx.toolCalls.filter((c) => c.name === 'search_traces' && c.observation.ok).at(-1);
    if (!last) return rs;
    const d = last.observation.data as SearchTracesData;
    const pool = [...new Set([d.parent, ...d.children].map((s) => s.ref))];
    const picked: string[] = [];
    while (picked.length < Math.min(rs.length, pool.length)) picked.push(...pool.splice(Math.floor(rng.next() * pool.length), 1));
    return picked.map((ref) => ({ span: ref }));
  });
}

export async function teacherEpisodes(opts: TeacherOptions): Promise<TeacherData> {
  const episode = parseEpisodeSettings(opts.episode ?? {});
  const expertSettings = ExpertSettingsSchema.parse(opts.expert ?? {});
  const detours = DetourSettingsSchema.parse(opts.detours ?? { rate: 0 });
  const variants = opts.variants ?? 1;
  if (!Number.isInteger(variants) || variants < 1) throw new Error(`variants must be a positive integer, got ${variants}`);
  const seed = opts.seed ?? 0;
  const random = opts.answerSpans === 'random';
  const out: TeacherData = { episodes: [], played: 0, correct: 0 };
  for (const [i, c] of opts.cases.entries()) {
    for (let v = 0; v < variants; v++) {
      const expert = createExpert(opts.dataset, expertSettings);
      const worded = opts.reasoning === false ? callsOnly(expert) : expert;
      const episodeSeed = seed + i * variants + v;
      // The random answers draw from a stream apart from the detours'.
      const named = random ? answersAtRandom(worded, episodeSeed ^ 0x5eed) : opts.answerSpans ? answersBySpan(worded) : worded;
      const policy = new DetourPolicy(named, detours, episodeSeed);
      const record = await runEpisode({ dataset: opts.dataset, case: c, policy, protocol: 'rot', settings: episode });
      out.played++;
      const right = answeredCorrectly(opts.dataset, c, record);
      if (right) out.correct++;
      if (!right && !random) continue;
      out.episodes.push({ case: c, record, tools: policy.firstTools, untrainedTurns: policy.untrainedTurns });
    }
  }
  return out;
}
