/**
 * The README's main command on its own preset: `trainer-ctl train configs/tiny-cpu.yaml`, run
 * as CI runs it (from the repository, the dataset and the tiny model made by the run when
 * missing), into a scratch run directory. All three stages complete, every stage ends with a
 * checkpoint and a held-out evaluation, and stage 1 leaves a policy that plays the protocol.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadRunConfig } from '../src/config/index';
import { readMetrics } from '../src/run-files/metrics-log';
import { readState } from '../src/run-files/state';
import { REPO_ROOT } from '../../../testkit/nezha';
import { runCli } from './train-fixtures';

const PRESET = join(REPO_ROOT, 'configs', 'tiny-cpu.yaml');
const scratch = mkdtempSync(join(tmpdir(), 'train-preset-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const train = (runDir: string) => runCli(['train', PRESET, '--run-dir', runDir]);

interface Eval {
  cases: number;
  format_valid: number;
  summary: { per_fault: { service: { n: number; mrr: number } } };
}

describe('configs/tiny-cpu.yaml', () => {
  it('runs SFT and the three GRPO stages, each ending with a checkpoint and an evaluation', async () => {
    const runDir = join(scratch, 'run');
    const r = await train(runDir);
    expect(r.code, r.stderr.slice(-4000)).toBe(0);
    const config = loadRunConfig(PRESET).config;
    const state = readState(runDir)!;
    expect(state.done).toBe(true);
    const metrics = readMetrics(runDir);
    const grpo = metrics.filter((m) => m.kind === 'grpo');
    for (const stage of ['priming', 'exploration', 'refinement'] as const) {
      expect(grpo.filter((m) => m.stage === stage).map((m) => m.step)).toEqual([...Array(config.stages[stage].steps).keys()]);
    }
    const sft = metrics.filter((m) => m.kind === 'sft');
    expect(sft.length).toBeGreaterThan(0);
    expect(state.updates).toBe(sft.length + grpo.filter((m) => m.update !== undefined && m.update !== null).length);
    const evals = Object.fromEntries(
      ['sft', 'priming', 'exploration', 'refinement'].map((n) => [
        n,
        JSON.parse(readFileSync(join(runDir, `eval-${n}.json`), 'utf8')) as Eval,
      ]),
    );
    for (const [name, e] of Object.entries(evals)) {
      expect(e.cases, name).toBe(config.dataset.max_eval_cases);
      expect(r.stdout).toContain(`eval ${name} (policy v`);
      expect(state.stage_checkpoints?.[name as keyof typeof state.stage_checkpoints], name).toBeTruthy();
    }
    // SFT on the expert's conversations teaches the protocol, and stage 1's GRPO (format reward on
    // every training fault) carries it to faults the teacher never got right: held-out episodes
    // end with their own print_results after valid calls only.
    expect(evals.sft.format_valid).toBeGreaterThanOrEqual(0.5);
    expect(evals.priming.format_valid).toBeGreaterThanOrEqual(0.75);
  }, 1_500_000);
});
