/**
 * The run's progress on disk (RUN_DIR/state.json): what has completed, written atomically
 * (temp file + rename) at every boundary (an SFT update, a GRPO step, an evaluation), so a
 * killed run resumes from the last completed one and never applies an update twice.
 */
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { writing } from '../disk-errors';
import { STAGE_NAMES, type StageName } from '../config/index';

export interface StageProgress {
  /** GRPO steps of the stage completed. */
  steps: number;
  /** The stage's final checkpoint and evaluation are written. */
  done: boolean;
}

export interface RunState {
  run_name: string;
  /** Train updates applied; the next train job has this update index. */
  updates: number;
  /**
   * Newest policy: its version (version 0: the base model) and the directory of the newest export
   * (SFT updates before the last are not exported, TrainJob.export).
   */
  policy_version: number;
  policy_dir: string;
  /** Newest checkpoint directory, when one was written. */
  checkpoint?: string;
  /** The checkpoint the train engine that made the newest update was loaded from; kept by checkpoint pruning. */
  engine_checkpoint?: string;
  /** The checkpoint each finished stage (and 'sft') ended with; kept by checkpoint pruning. */
  stage_checkpoints?: Record<string, string>;
  /** Stage-1 supervised fine-tuning: updates done, and whether it (and its evaluation) finished. */
  sft: { updates: number; done: boolean };
  stages: Record<StageName, StageProgress>;
  /** Updates done when the training cases were last played greedily (logging.track); absent before the first time. */
  tracked?: number;
  /** Lines of metrics.jsonl that belong to completed boundaries (a resume cuts the rest). */
  metrics_lines: number;
  done: boolean;
  updated_at: string;
}

export const STATE_FILE = 'state.json';

export function initialState(runName: string, baseModelDir: string): RunState {
  const stages = Object.fromEntries(STAGE_NAMES.map((s) => [s, { steps: 0, done: false }])) as Record<StageName, StageProgress>;
  return {
    run_name: runName,
    updates: 0,
    policy_version: 0,
    policy_dir: baseModelDir,
    sft: { updates: 0, done: false },
    stages,
    metrics_lines: 0,
    done: false,
    updated_at: new Date().toISOString(),
  };
}

export function readState(runDir: string): RunState | undefined {
  const file = join(runDir, STATE_FILE);
  if (!existsSync(file)) return undefined;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as RunState;
  } catch (e) {
    throw new Error(`${file}: not a readable run state (${(e as Error).message})`);
  }
}

/**
 * Writes a run file as JSON through a temporary file and a rename: a reader (`trainer-ctl
 * status`, a resuming controller) sees the old content or the new, never a half-written file.
 */
export function writeJsonAtomically(file: string, value: unknown): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writing(file, () => {
    try {
      writeFileSync(tmp, `${JSON.stringify(value, null, 1)}\n`);
    } catch (e) {
      // The part written of a full disk's file is space the resume needs back.
      rmSync(tmp, { force: true });
      throw e;
    }
    renameSync(tmp, file);
  });
}

export function writeState(runDir: string, state: RunState): void {
  state.updated_at = new Date().toISOString();
  writeJsonAtomically(join(runDir, STATE_FILE), state);
}

/**
 * The trainer's weights exist only at checkpoints, so the state at each checkpointed update is
 * kept (RUN_DIR/states/update-<n>.json): a resume whose trainer reloads checkpoint n goes back
 * to exactly that state and replays the steps after it.
 */
export function snapshotFile(runDir: string, updates: number): string {
  return join(runDir, 'states', `update-${updates}.json`);
}

export function writeSnapshot(runDir: string, state: RunState): void {
  const file = snapshotFile(runDir, state.updates);
  writing(file, () => {
    mkdirSync(join(runDir, 'states'), { recursive: true });
    writeFileSync(file, `${JSON.stringify(state, null, 1)}\n`);
  });
}

/**
 * The state to continue from when the trainer resumes at `checkpointUpdates` (undefined: no
 * checkpoint, the base model): `state` itself when it is not ahead of the trainer, otherwise
 * the snapshot taken at that checkpoint.
 */
export function rewindTo(runDir: string, state: RunState, checkpointUpdates: number | undefined, baseModelDir: string): RunState {
  const at = checkpointUpdates ?? 0;
  if (state.updates <= at) return state;
  if (checkpointUpdates === undefined) return initialState(state.run_name, baseModelDir);
  const file = snapshotFile(runDir, at);
  if (!existsSync(file)) throw new Error(`${runDir}: checkpoint at update ${at} has no controller state snapshot (${file})`);
  return JSON.parse(readFileSync(file, 'utf8')) as RunState;
}

/** The stage the run is in: the first enabled one not done; undefined when all are. */
export function currentStage(state: RunState, enabled: (s: StageName) => boolean): StageName | undefined {
  return STAGE_NAMES.find((s) => enabled(s) && !state.stages[s].done);
}
