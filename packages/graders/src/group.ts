/**
 * Grading one group: all G samples of one question, in sample order. Samples are graded
 * one after another so that, within a group, the first of two identical paths is the new one.
 */
import type { EpisodeRecord, GroundTruth } from '@thinkfl/env';
import { parseComposite, type CompositeSpec } from './composite';
import type { DiversityCache } from './diversity/cache';
import { getGrader } from './registry';
import { parseGraderSettings, type GraderSettingsInput } from './settings';
import type { GradeContext, GradeResult, PodToService } from './types';

export interface GroupContext {
  truth: GroundTruth;
  /** Diversity-cache key of the question; the samples' common case id by default. */
  questionId?: string;
  podToService?: PodToService;
  /** The fault's type (Fault.type), for ORACL's (component, type) pairs. */
  faultType?: string;
  /** The fault's start, Unix µs (OpenRCA's occurrence time). */
  faultStartUs?: number;
  /** An OpenRCA query's scoring points and failures. */
  openrca?: { scoringPoints: string; failures: number };
  /** D_max the episodes were played with (the episode settings' d_max), for the route grader (Eq. 10). */
  d_max: number;
  settings?: GraderSettingsInput;
  diversity?: DiversityCache;
  /**
   * Identity of the group (e.g. its group id): sample i grades as "<groupId>#<i>" in the
   * diversity cache, so grading the same group again gives the same scores. Default: none,
   * each grading counts as new samples.
   */
  groupId?: string;
}

export interface TermGrade extends GradeResult {
  weight: number;
}

export interface SampleGrade {
  /** Weighted sum of the terms' scores. */
  total: number;
  /** Each grader's result, by grader name. */
  graders: Record<string, TermGrade>;
}

export interface GroupGrade {
  /** Per-sample totals, in sample order (what advantages are computed from). */
  totals: number[];
  samples: SampleGrade[];
}

function questionOf(episodes: EpisodeRecord[], given?: string): string {
  if (given !== undefined) return given;
  const ids = new Set(episodes.map((e) => e.case_id));
  if (ids.size > 1) throw new Error(`a group is one question, but its samples have case ids ${[...ids].join(', ')}`);
  return episodes[0]?.case_id ?? '';
}

export async function gradeGroup(episodes: EpisodeRecord[], group: GroupContext, composite: CompositeSpec | string): Promise<GroupGrade> {
  const spec = parseComposite(composite);
  const ctx: GradeContext = {
    truth: group.truth,
    questionId: questionOf(episodes, group.questionId),
    podToService: group.podToService,
    faultType: group.faultType,
    faultStartUs: group.faultStartUs,
    openrca: group.openrca,
    d_max: group.d_max,
    settings: parseGraderSettings(group.settings),
    diversity: group.diversity,
  };
  const samples: SampleGrade[] = [];
  for (const [i, episode] of episodes.entries()) {
    const graders: Record<string, TermGrade> = {};
    let total = 0;
    const sampleCtx = group.groupId === undefined ? ctx : { ...ctx, sampleId: `${group.groupId}#${i}` };
    for (const term of spec.terms) {
      const r = await getGrader(term.grader).grade(episode, sampleCtx);
      graders[term.grader] = { ...r, weight: term.weight };
      total += term.weight * r.score;
    }
    samples.push({ total, graders });
  }
  return { totals: samples.map((s) => s.total), samples };
}
