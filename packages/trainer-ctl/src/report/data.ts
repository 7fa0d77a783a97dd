/**
 * What the run report shows, gathered from a run directory: every scalar series (the names of
 * logs/scalars.ts), each held-out evaluation beside the scripted baselines played on the same
 * cases, and the logged episodes with their case's truth.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  evaluate,
  loadDataset,
  policyNames,
  solverFor,
  type Dataset,
  type EpisodeRecord,
  type EvalSummary,
  type GroundTruth,
  type Level,
} from '@thinkfl/env';
import { loadRunConfig, type RunConfig } from '../config/index';
import type { EvalReport } from '../controller/evaluation';
import { EPISODES_FILE, readJsonLines } from '../run-files/metrics-log';
import { readState } from '../run-files/state';
import { readEvals, runSeries, type Point } from '../ci/series';

/** An eval-<name>.json as the controller writes it (controller/evaluation.ts). */
type EvalFile = Omit<EvalReport, 'requests'> & { requests: { case_id: string }[] };

export interface EvalRow {
  policy: string;
  summary: Pick<EvalSummary, 'per_request' | 'per_fault' | 'per_fault_vote'>;
}

export interface StageEval {
  name: string;
  policy_version: number;
  cases: number;
  format_valid: number;
  /** Absent for evaluations written before it existed. */
  format_valid_by_type?: EvalReport['format_valid_by_type'];
  answered: number;
  levels: Level[];
  /** The trained policy first, then each scripted baseline on the same cases. */
  rows: EvalRow[];
}

export interface ReportEpisode {
  /** stage:step of a training step, or eval:<name>. */
  tag: string;
  case_id: string;
  reward?: number;
  tool_calls: number;
  stop_reason: EpisodeRecord['stop_reason'];
  answer: EpisodeRecord['answer'];
  truth?: GroundTruth;
  messages: EpisodeRecord['messages'];
}

export interface ReportData {
  run: string;
  run_dir: string;
  created_at: string;
  done: boolean;
  updates: number;
  series: Record<string, Point[]>;
  evals: StageEval[];
  episodes: ReportEpisode[];
}

/** The run's config: the original file run.json names (its relative paths resolve there), else the copy in the run directory. */
function runConfig(runDir: string): RunConfig {
  const info = join(runDir, 'run.json');
  const original = existsSync(info) ? (JSON.parse(readFileSync(info, 'utf8')) as { config_file?: string }).config_file : undefined;
  return loadRunConfig(original && existsSync(original) ? original : join(runDir, 'config.yaml'), { checkPaths: false }).config;
}

/** Every scripted policy and baseline on the evaluation's cases, played as the run's episodes are. */
async function baselines(dataset: Dataset, config: RunConfig, caseIds: string[]): Promise<EvalRow[]> {
  const byId = new Map(dataset.cases.map((c) => [c.id, c]));
  const cases = caseIds.map((id) => byId.get(id)).filter((c) => c !== undefined);
  const { protocol, ...episode } = config.episode;
  const rows: EvalRow[] = [];
  for (const name of policyNames()) {
    const r = await evaluate(dataset, cases, solverFor(dataset, name, { protocol, episode }));
    rows.push({ policy: `${name} (scripted)`, summary: r });
  }
  return rows;
}

function readEpisodes(runDir: string, truthOf: (caseId: string) => GroundTruth | undefined): ReportEpisode[] {
  const file = join(runDir, EPISODES_FILE);
  return readJsonLines<{ stage?: string; step?: number; eval?: string; reward?: number; episode: EpisodeRecord }>(file).map((e, i) => {
    if (!Array.isArray(e.episode?.tool_calls)) {
      throw new Error(
        `${file}:${i + 1}: not an episode record with snake_case keys (tool_calls); a run written before issue 28's rename (toolCalls) has no report`,
      );
    }
    return {
      tag: e.eval !== undefined ? `eval:${e.eval}` : `${e.stage}:${e.step}`,
      case_id: e.episode.case_id,
      reward: e.reward,
      tool_calls: e.episode.tool_calls.length,
      stop_reason: e.episode.stop_reason,
      answer: e.episode.answer,
      truth: truthOf(e.episode.case_id),
      messages: e.episode.messages,
    };
  });
}

export async function gatherReport(runDir: string, opts: { baselines?: boolean } = {}): Promise<ReportData> {
  const state = readState(runDir);
  if (!state) throw new Error(`${runDir}: no state.json (not a run directory, or the run has not started)`);
  const config = runConfig(runDir);
  const dataset = await loadDataset(config.dataset.path);
  const truth = new Map(dataset.cases.map((c) => [c.id, c.truth]));
  const evals: StageEval[] = [];
  // A run's evaluations share their held-out cases: the baselines are played once per case list.
  const played = new Map<string, EvalRow[]>();
  for (const e of readEvals<EvalFile>(runDir)) {
    const rows: EvalRow[] = [{ policy: `policy v${e.policy_version}`, summary: e.summary }];
    const ids = e.requests.map((r) => r.case_id);
    if (opts.baselines !== false) {
      const key = ids.join('\n');
      if (!played.has(key)) played.set(key, await baselines(dataset, config, ids));
      rows.push(...played.get(key)!);
    }
    evals.push({
      name: e.name,
      policy_version: e.policy_version,
      cases: e.cases,
      format_valid: e.format_valid,
      ...(e.format_valid_by_type && { format_valid_by_type: e.format_valid_by_type }),
      answered: e.answered,
      levels: e.summary.levels,
      rows,
    });
  }
  return {
    run: state.run_name,
    run_dir: runDir,
    created_at: new Date().toISOString(),
    done: state.done,
    updates: state.updates,
    series: Object.fromEntries(runSeries(runDir)),
    evals,
    episodes: readEpisodes(runDir, (id) => truth.get(id)),
  };
}
