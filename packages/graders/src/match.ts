/**
 * Matching answers and path components against the ground truth, case-insensitively and
 * trimmed. The rank itself is env's `rankOfTruth` (one definition, shared with evaluation);
 * this module only normalises names before handing them over.
 */
import { componentAt, matchesTruth, rankOfTruth, type GroundTruth, type MatchContext, type RootCause } from '@thinkfl/env';
import type { GradeContext, PodToService } from './types';

/** Lower-cased and trimmed; undefined for anything but a non-blank string (model output is untrusted). */
export function normalizeName(name: unknown): string | undefined {
  if (typeof name !== 'string') return undefined;
  const t = name.trim().toLowerCase();
  return t ? t : undefined;
}

export function normalizeItem(item: RootCause): RootCause {
  const i: Partial<RootCause> = typeof item === 'object' && item !== null ? item : {};
  return { node: normalizeName(i.node), service: normalizeName(i.service), pod: normalizeName(i.pod) };
}

/** True when the item names at least one component (node, service or pod). */
export function namesAnything(item: RootCause): boolean {
  const n = normalizeItem(item);
  return n.node !== undefined || n.service !== undefined || n.pod !== undefined;
}

function normalizeTruth(truth: GroundTruth): GroundTruth {
  return { ...normalizeItem(truth), level: truth.level };
}

const NO_PODS: MatchContext = { serviceOfPod: () => undefined };
// Built once per pod map: graders match many names against the same map.
const built = new WeakMap<object, MatchContext>();

/** Lookups receive normalised (lower-case) pod names; Kubernetes names are lower-case already. */
export function matchContext(podToService?: PodToService): MatchContext {
  if (!podToService) return NO_PODS;
  const cached = built.get(podToService);
  if (cached) return cached;
  let mc: MatchContext;
  if (typeof podToService === 'function') {
    mc = { serviceOfPod: (pod) => normalizeName(podToService(pod)) };
  } else {
    const map = new Map<string, string>();
    for (const [pod, service] of Object.entries(podToService)) {
      const p = normalizeName(pod);
      const s = normalizeName(service);
      if (p && s) map.set(p, s);
    }
    mc = { serviceOfPod: (pod) => map.get(pod) };
  }
  built.set(podToService, mc);
  return mc;
}

/**
 * 0-based rank of the true root cause in the answer at the truth's level, or null when it is
 * absent (or there is no answer). Throws when the truth names no component at its own level.
 */
export function truthRank(answer: RootCause[] | null, ctx: GradeContext): number | null {
  const truth = normalizeTruth(ctx.truth);
  const rank = rankOfTruth(answer ? answer.map(normalizeItem) : null, truth, truth.level, matchContext(ctx.podToService));
  if (rank === undefined) {
    throw new Error(`ground truth of question ${ctx.questionId} names no ${truth.level}: ${JSON.stringify(ctx.truth)}`);
  }
  return rank;
}

/** True when a bare component name (service, pod or node) denotes the truth at its level. */
export function namesTruth(name: string, ctx: GradeContext): boolean {
  const n = normalizeName(name);
  if (!n) return false;
  const truth = normalizeTruth(ctx.truth);
  const mc = matchContext(ctx.podToService);
  return [{ service: n }, { pod: n }, { node: n }].some((item) => matchesTruth(item, truth, truth.level, mc));
}

/**
 * Identity of an answer item for duplicate counting: the component it names at the truth's
 * level, or, when it names none there, all its normalised fields.
 */
export function answerKey(item: RootCause, ctx: GradeContext): string {
  const n = normalizeItem(item);
  const at = componentAt(n, ctx.truth.level, matchContext(ctx.podToService));
  return at !== undefined ? `${ctx.truth.level}:${at}` : `item:${n.node ?? ''}|${n.service ?? ''}|${n.pod ?? ''}`;
}
