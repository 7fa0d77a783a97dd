/**
 * Learning tracked during the run (logging.track): a fixed set of training cases, spread over
 * the training faults, played greedily before the first update and after every N updates. Each
 * point is a metrics line (kind track), so a resume cuts and replays it with the steps around it.
 */
import { spreadCases, type Case } from '@thinkfl/env';
import { evalFigures } from '../logs/scalars';
import { playGreedy, type EvalContext } from './evaluation';
import type { MetricsRecord } from '../run-files/metrics-log';
import type { RunState } from '../run-files/state';

/** The training cases every tracking point plays (none when tracking is off). */
export function trackCases(train: Case[], cases: number): Case[] {
  return cases > 0 ? spreadCases(train, cases) : [];
}

/** Whether the policy after `state.updates` updates is due to be tracked and has not been. */
export function trackDue(state: RunState, everyUpdates: number, cases: Case[]): boolean {
  return cases.length > 0 && state.updates % everyUpdates === 0 && state.tracked !== state.updates;
}

/** Plays the tracked cases with the current policy; the metrics line of the point. */
export async function trackPoint(ctx: Omit<EvalContext, 'cases'>, state: RunState, stage: string, cases: Case[]): Promise<MetricsRecord> {
  const { report } = await playGreedy({ ...ctx, cases }, `track-u${state.updates}`, state.policy_version);
  return {
    kind: 'track',
    stage,
    update: state.updates,
    policy_version: state.policy_version,
    cases: cases.length,
    ...evalFigures(report),
    at: new Date().toISOString(),
  };
}
