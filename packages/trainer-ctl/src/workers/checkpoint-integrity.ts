/**
 * Whether a checkpoint directory is whole. A checkpoint is written under a temporary name and
 * renamed, but a crash of the machine (or a copy cut short by an operator) can still leave a
 * directory whose name says "done" and whose files do not: after a power loss the rename may
 * reach the disk before the data. So the train worker writes, last, a record of every file's
 * size (trainer-state.json) and syncs the files before the rename; a resume checks the record
 * and the safetensors headers before it trusts a checkpoint.
 */
import { closeSync, fstatSync, fsyncSync, openSync, readdirSync, readFileSync, readSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/** Written into every checkpoint, last: how many updates its weights have seen, and its files' sizes. */
export const TRAINER_STATE_FILE = 'trainer-state.json';

export interface TrainerState {
  updates: number;
  saved_at: string;
  /** Every other file of the checkpoint (path relative to it) and its size in bytes. */
  files?: Record<string, number>;
}

/** Plain files under `dir`, as paths relative to it, sorted. */
function filesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) out.push(relative(dir, p));
    }
  };
  walk(dir);
  return out.sort();
}

/** fsync of every file under `dir` and of the directories themselves, so a rename that follows publishes whole data. */
export function syncTree(dir: string): void {
  const sync = (p: string) => {
    const fd = openSync(p, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  };
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) sync(p);
    }
    sync(d);
  };
  walk(dir);
}

/** Records the checkpoint in `dir` (every file already written): its update count and its files' sizes. */
export function writeTrainerState(dir: string, updates: number): void {
  const files = Object.fromEntries(
    filesUnder(dir)
      .filter((f) => f !== TRAINER_STATE_FILE)
      .map((f) => [f, statSync(join(dir, f)).size]),
  );
  const state: TrainerState = { updates, saved_at: new Date().toISOString(), files };
  writeFileSync(join(dir, TRAINER_STATE_FILE), `${JSON.stringify(state)}\n`);
}

/**
 * Why a safetensors file is not whole, or undefined: its header (8-byte length, then JSON) must
 * parse and its tensors' data must end exactly at the end of the file.
 */
export function safetensorsProblem(file: string): string | undefined {
  const fd = openSync(file, 'r');
  try {
    const size = fstatSync(fd).size;
    const head = Buffer.alloc(8);
    if (size < 8 || readSync(fd, head, 0, 8, 0) < 8) return `${size} bytes, shorter than a safetensors header`;
    const n = Number(head.readBigUInt64LE(0));
    if (8 + n > size) return `header of ${n} bytes in a file of ${size}`;
    const json = Buffer.alloc(n);
    readSync(fd, json, 0, n, 8);
    let header: Record<string, { data_offsets?: [number, number] }>;
    try {
      header = JSON.parse(json.toString('utf8'));
    } catch {
      return 'header is not JSON';
    }
    const end = Math.max(
      0,
      ...Object.entries(header)
        .filter(([k]) => k !== '__metadata__')
        .map(([, t]) => t.data_offsets?.[1] ?? 0),
    );
    if (8 + n + end !== size) return `${size} bytes, its tensors need ${8 + n + end}`;
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/** Reads a checkpoint's trainer state; throws saying why the checkpoint is not whole. */
export function checkedTrainerState(dir: string): TrainerState {
  const file = join(dir, TRAINER_STATE_FILE);
  let state: TrainerState;
  try {
    state = JSON.parse(readFileSync(file, 'utf8')) as TrainerState;
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw new Error(
      code === 'ENOENT'
        ? `no ${TRAINER_STATE_FILE} (cut before it was written)`
        : `${TRAINER_STATE_FILE} is unreadable (${(e as Error).message})`,
    );
  }
  if (!Number.isInteger(state.updates) || state.updates < 0) throw new Error(`${TRAINER_STATE_FILE} has no update count`);
  for (const [f, size] of Object.entries(state.files ?? {})) {
    let actual: number;
    try {
      actual = statSync(join(dir, f)).size;
    } catch {
      throw new Error(`${f} is missing`);
    }
    if (actual !== size) throw new Error(`${f} has ${actual} bytes, ${size} were written`);
  }
  // Checked also without a size record (checkpoints written before it): weights are what a resume loads.
  for (const f of filesUnder(dir).filter((x) => x.endsWith('.safetensors'))) {
    const why = safetensorsProblem(join(dir, f));
    if (why) throw new Error(`${f} is cut (${why})`);
  }
  return state;
}
