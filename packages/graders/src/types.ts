/**
 * Shapes every grader shares: what a grader is given (one episode and the question's
 * context) and what it returns (a score and the named parts it was computed from).
 */
import type { EpisodeRecord, GroundTruth } from '@thinkfl/env';
import type { DiversityCache } from './diversity/cache';
import type { GraderSettings } from './settings';

/** The service of a pod: a function (e.g. Topology.serviceOfPod) or a plain map. */
export type PodToService = ((pod: string) => string | undefined) | Record<string, string>;

export interface GradeResult {
  score: number;
  /** The quantities the score was computed from, by name (for logs and reports). */
  parts: Record<string, number>;
}

/** Everything about the question a grader may need besides the episode. */
export interface GradeContext {
  truth: GroundTruth;
  /** Key of the question in the diversity cache (the case id by default). */
  questionId: string;
  podToService?: PodToService;
  /** The fault's type (Fault.type), for graders over (component, type) pairs (ORACL Eq. 6). */
  faultType?: string;
  /** The fault's start, Unix µs: the occurrence time OpenRCA grading checks when no OpenRCA query is given. */
  faultStartUs?: number;
  /** An OpenRCA query's scoring points and its number of failures (openrca_* graders). */
  openrca?: { scoringPoints: string; failures: number };
  /** D_max the episodes were played with (the episode settings' d_max): the route grader's budget, Eq. 10. */
  d_max: number;
  /** Parsed settings of every grader (see settings.ts). */
  settings: GraderSettings;
  /** Needed only by the diversity grader. */
  diversity?: DiversityCache;
  /**
   * Identity of the sample being graded in the diversity cache (its first owner of a path);
   * the same id on a second grading gives the same answer. Default: a fresh id per grading.
   */
  sampleId?: string;
}

export interface Grader {
  /** Registry name, used in composites and run configs. */
  readonly name: string;
  readonly description: string;
  grade(episode: EpisodeRecord, ctx: GradeContext): GradeResult | Promise<GradeResult>;
}
