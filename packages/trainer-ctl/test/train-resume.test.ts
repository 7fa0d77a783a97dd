/**
 * `trainer-ctl train` end to end on a very small run (tiny model created by the run itself,
 * real Nezha cases, embedded Redis, worker child processes): an unbroken run, and a run whose
 * controller is SIGKILLed in the middle of stage 1 and resumed with --resume. Both finish
 * with the same number of updates, one metrics line per SFT update and per step, every
 * evaluation written, and no process of theirs left running.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readMetrics, readState, type ProcessRecord, type RunState } from '../src/controller/index';
import { ensureNezhaDataset, NEZHA_DATASET, REPO_ROOT } from '../../../testkit/nezha';

const CLI = join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs');
let scratch: string;
let configFile: string;

/** GRPO steps 2 + 1 + 1, each making an update (skip_equal_groups off). */
const GRPO_STEPS = ['priming:0', 'priming:1', 'exploration:0', 'refinement:0'];
const TIMEOUT = 900_000;

/** One SFT update per batch of 2 teacher conversations (the teacher keeps only correct ones, up to 4). */
function expectedKeys(runDir: string): string[] {
  const n = (JSON.parse(readFileSync(join(runDir, 'teacher-samples.json'), 'utf8')) as unknown[]).length;
  expect(n).toBeGreaterThan(0);
  expect(n).toBeLessThanOrEqual(4);
  return [...Array.from({ length: Math.ceil(n / 2) }, (_, i) => `sft:${i}`), ...GRPO_STEPS];
}

beforeAll(async () => {
  await ensureNezhaDataset();
  scratch = mkdtempSync(join(tmpdir(), 'h11-train-'));
  configFile = join(scratch, 'run.yaml');
  writeFileSync(
    configFile,
    `run: { name: resume-test, seed: 0 }
model:
  dir: ${join(scratch, 'model')}
  dtype: float32
  max_context_tokens: 4096
  create_tiny: { seed: 0, hidden_size: 64, layers: 2, heads: 4, kv_heads: 2, head_dim: 16, intermediate_size: 128 }
dataset: { path: ${NEZHA_DATASET}, max_cases_per_fault: 2, max_eval_cases: 2 }
episode: { protocol: rot, dMax: 4, toolSettings: { spanAliases: true } }
generation:
  backend: { kind: onnx, threads: 1 }
  sampling: { maxTokens: 24 }
grpo:
  group_size: 2
  cases_per_step: 1
  max_refill_groups: 0
  advantage: { skip_equal_groups: false }
  loss: { kl_coef: 0.05 }
  optimizer: { lr: 1.0e-3 }
graders: { route: { dMax: 4 } }
stages:
  priming: { sft: { conversations: 4, epochs: 1, batch_size: 2, optimizer: { lr: 1.0e-3 } }, steps: 2 }
  exploration: { steps: 1, repeats: 1 }
  refinement: { steps: 1 }
workers:
  rollout: { count: 1, concurrency: 2 }
checkpoints: { every_steps: 1 }
`,
  );
});

afterAll(() => {
  rmSync(scratch, { recursive: true, force: true });
});

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  stdout: string;
}

function train(runDir: string, extra: string[], onState?: (s: RunState, kill: () => void) => void): Promise<Exit> {
  const child = spawn(process.execPath, [CLI, 'train', configFile, '--run-dir', runDir, ...extra], { cwd: REPO_ROOT });
  let stderr = '';
  let stdout = '';
  child.stderr.on('data', (b: Buffer) => (stderr += b));
  child.stdout.on('data', (b: Buffer) => (stdout += b));
  const watch = onState
    ? setInterval(() => {
        const s = existsSync(join(runDir, 'state.json')) ? readState(runDir) : undefined;
        if (s) onState(s, () => child.kill('SIGKILL'));
      }, 200)
    : undefined;
  return new Promise((done) =>
    child.on('exit', (code, signal) => {
      clearInterval(watch);
      done({ code, signal, stderr, stdout });
    }),
  );
}

function stepKeys(runDir: string): string[] {
  return readMetrics(runDir).map((m) => (m.kind === 'sft' ? `sft:${m.update}` : `${m.stage}:${m.step}`));
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('trainer-ctl train', () => {
  let unbroken: RunState;

  it('runs all three stages: SFT, GRPO steps, a checkpoint and an evaluation per stage', async () => {
    const runDir = join(scratch, 'unbroken');
    const r = await train(runDir, []);
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(join(scratch, 'model', 'onnx', 'model.onnx'))).toBe(true);
    unbroken = readState(runDir)!;
    const keys = expectedKeys(runDir);
    expect(unbroken.done).toBe(true);
    expect(unbroken.updates).toBe(keys.length);
    expect(unbroken.policyVersion).toBe(keys.length);
    expect(stepKeys(runDir)).toEqual(keys);
    for (const name of ['sft', 'priming', 'exploration', 'refinement']) {
      const report = JSON.parse(readFileSync(join(runDir, `eval-${name}.json`), 'utf8'));
      expect(report.cases).toBe(2);
      expect(report.summary.perFault.service.n).toBe(2);
      expect(r.stdout).toContain(`eval ${name} (policy v`);
    }
    const grpo = readMetrics(runDir).filter((m) => m.kind === 'grpo');
    for (const m of grpo) {
      expect(m).toMatchObject({ samples: 2, groups: 1, keptGroups: 1 });
      expect(Object.keys(m.graders as object).length).toBeGreaterThan(0);
      expect(typeof (m.train as Record<string, number>).loss).toBe('number');
    }
    // The KL reference is the policy at the start of GRPO (after SFT), not the model loaded before SFT.
    const kl = grpo.map((m) => (m.train as Record<string, number>).kl);
    expect(Math.abs(kl[0])).toBeLessThanOrEqual(1e-6);
    expect(kl[1]).toBeGreaterThan(0);
    const procs = JSON.parse(readFileSync(join(runDir, 'processes.json'), 'utf8')) as ProcessRecord[];
    expect(procs).toEqual([]);
  }, TIMEOUT);

  it('resumed after a SIGKILL in the middle of stage 1, finishes with the same updates and no duplicate metrics', async () => {
    const runDir = join(scratch, 'killed');
    let killedAt: RunState | undefined;
    const first = await train(runDir, [], (s, kill) => {
      if (!killedAt && s.stages.priming.steps >= 1) {
        killedAt = structuredClone(s);
        kill();
      }
    });
    expect(first.signal).toBe('SIGKILL');
    expect(killedAt!.stages.priming.done).toBe(false);
    const left = JSON.parse(readFileSync(join(runDir, 'processes.json'), 'utf8')) as ProcessRecord[];
    expect(left.map((p) => p.role).sort()).toEqual(['redis', 'rollout-0', 'train']);

    const second = await train(runDir, ['--resume']);
    expect(second.code, second.stderr).toBe(0);
    const final = readState(runDir)!;
    expect(final.done).toBe(true);
    expect(final.updates).toBe(unbroken.updates);
    expect(stepKeys(runDir)).toEqual(expectedKeys(runDir));
    // The KL reference came back from the checkpoint (taken after the first GRPO step), not from the loaded weights.
    const trainLog = readFileSync(join(runDir, 'logs', 'train.log'), 'utf8');
    expect(trainLog.match(/engine loaded checkpoint .*, KL reference grpo_start/g)).toHaveLength(1);
    expect(trainLog.match(/KL reference: the policy before update/g)).toHaveLength(1);
    // The killed controller's children were stopped by the resumed one, which then stopped its own.
    for (const p of left) expect(alive(p.pid)).toBe(false);
  }, TIMEOUT);

  it('says a finished run is complete instead of training again', async () => {
    const r = await train(join(scratch, 'unbroken'), ['--resume']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`already complete (${unbroken.updates} updates)`);
  }, TIMEOUT);
});
