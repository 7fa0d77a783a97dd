/**
 * Which cases a run trains and evaluates on, and which cases each GRPO step plays, on the real
 * Nezha import: disjoint faults, caps respected, deterministic schedules, refills that continue
 * the stage's sequence, exploration playing each question `repeats` times across steps, and
 * the SFT updates' batches.
 */
import { join } from 'node:path';
import { loadDataset, type Dataset } from '@thinkfl/env';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadRunConfig, type RunConfig } from '../src/config/index';
import { runCases, sftUpdates, stepCases, teacherCases } from '../src/controller/index';
import { sftPlan } from '../src/algo/sft/schedule';
import { ensureNezhaDataset, REPO_ROOT } from '../../../testkit/nezha';

let dataset: Dataset;
let base: RunConfig;

beforeAll(async () => {
  dataset = await loadDataset(await ensureNezhaDataset());
  base = loadRunConfig(join(REPO_ROOT, 'configs', 'tiny-cpu.yaml'), { checkPaths: false }).config;
});

function withConfig(edit: (c: RunConfig) => void): RunConfig {
  const c = structuredClone(base);
  edit(c);
  return c;
}

describe('runCases', () => {
  it('holds out whole faults, caps cases per fault and spreads the evaluation over the held-out faults', () => {
    const config = withConfig((c) => {
      c.dataset.max_cases_per_fault = 3;
      c.dataset.max_eval_cases = undefined;
    });
    const { train, eval: held } = runCases(dataset, config);
    const trainFaults = new Set(train.map((c) => c.fault_id));
    expect(held.length).toBeGreaterThan(0);
    for (const c of held) expect(trainFaults.has(c.fault_id)).toBe(false);
    const perFault = new Map<string, number>();
    for (const c of [...train, ...held]) perFault.set(c.fault_id, (perFault.get(c.fault_id) ?? 0) + 1);
    expect(Math.max(...perFault.values())).toBe(3);

    const heldFaults = new Set(held.map((c) => c.fault_id));
    const limited = runCases(
      dataset,
      withConfig((c) => {
        c.dataset.max_cases_per_fault = 3;
        c.dataset.max_eval_cases = heldFaults.size;
      }),
    );
    expect(limited.train).toEqual(train);
    expect(new Set(limited.eval.map((c) => c.fault_id))).toEqual(heldFaults);
    expect(limited.eval).toHaveLength(heldFaults.size);
  });

  it('is the same split for the same seed and a different one for another seed', () => {
    const a = runCases(dataset, base);
    expect(runCases(dataset, base).eval.map((c) => c.id)).toEqual(a.eval.map((c) => c.id));
    const b = runCases(
      dataset,
      withConfig((c) => (c.run.seed = 7)),
    );
    expect(b.eval.map((c) => c.id)).not.toEqual(a.eval.map((c) => c.id));
  });
});

describe('stepCases', () => {
  it('walks a seeded sequence: refills of step k are the cases step k+1 starts with', () => {
    const config = withConfig((c) => {
      c.grpo.cases_per_step = 3;
      c.grpo.max_refill_groups = 2;
    });
    const { train } = runCases(dataset, config);
    const s0 = stepCases('priming', 0, train, config);
    const s1 = stepCases('priming', 1, train, config);
    expect(s0.primary).toHaveLength(3);
    expect(s0.refill).toHaveLength(2);
    expect(s0.refill.map((c) => c.id)).toEqual(s1.primary.slice(0, 2).map((c) => c.id));
    expect(stepCases('priming', 1, train, config)).toEqual(s1);
    expect(new Set(s0.primary.map((c) => c.id)).size).toBe(3);
    expect(stepCases('refinement', 0, train, config).primary.map((c) => c.id)).not.toEqual(s0.primary.map((c) => c.id));
  });

  it('plays each exploration question `repeats` times across the stage (and, as 3 divides the pool of 6, never twice in one step)', () => {
    const config = withConfig((c) => {
      c.grpo.cases_per_step = 3;
      c.stages.exploration.steps = 8;
      c.stages.exploration.repeats = 4;
    });
    const { train } = runCases(dataset, config);
    const counts = new Map<string, number>();
    const perStep: string[][] = [];
    for (let step = 0; step < 8; step++) {
      const ids = stepCases('exploration', step, train, config).primary.map((c) => c.id);
      perStep.push(ids);
      for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    // 8 steps x 3 cases / 4 repeats = a pool of 6 questions, each played 4 times.
    expect(counts.size).toBe(6);
    expect([...counts.values()].every((n) => n === 4)).toBe(true);
    expect(perStep.filter((ids) => new Set(ids).size < ids.length)).toEqual([]);
  });

  it('refuses an empty training split with a clear error', () => {
    expect(() => stepCases('priming', 0, [], base)).toThrow(/train split has no cases/);
  });
});

describe('sftUpdates', () => {
  it('groups steps_per_update consecutive batches per update; every epoch covers each conversation once', () => {
    const config = withConfig((c) => {
      c.stages.priming.sft.batch_size = 2;
      c.stages.priming.sft.epochs = 2;
      c.stages.priming.sft.steps_per_update = 3;
    });
    const updates = sftUpdates(11, config);
    // 6 batches per epoch (the last of one conversation), 12 in all: updates of 3, 3, 3, 3.
    expect(updates.map((u) => u.length)).toEqual([3, 3, 3, 3]);
    const batches = updates.flat().map((step) => step.batch);
    expect(batches.map((b) => b.length)).toEqual([2, 2, 2, 2, 2, 1, 2, 2, 2, 2, 2, 1]);
    for (const epoch of [batches.slice(0, 6), batches.slice(6)]) expect(epoch.flat().sort((a, b) => a - b)).toEqual([...Array(11).keys()]);
    expect(batches.slice(0, 6)).not.toEqual(batches.slice(6));
    const one = withConfig((c) => {
      c.stages.priming.sft.batch_size = 2;
      c.stages.priming.sft.epochs = 2;
      c.stages.priming.sft.steps_per_update = 1;
    });
    expect(sftUpdates(11, one).map((u) => u[0].batch)).toEqual(batches);
    const rest = withConfig((c) => {
      c.stages.priming.sft.batch_size = 2;
      c.stages.priming.sft.epochs = 2;
      c.stages.priming.sft.steps_per_update = 5;
    });
    expect(sftUpdates(11, rest).map((u) => u.length)).toEqual([5, 5, 2]);
  });

  it('is the plan scripts/sft-tiny.ts runs (one SFT schedule, issue 8 item 7)', () => {
    const sft = base.stages.priming.sft;
    const plan = sftPlan(
      37,
      { epochs: sft.epochs, batch_size: sft.batch_size, warmup_steps: sft.warmup_steps, min_lr_ratio: sft.min_lr_ratio },
      { lr: sft.optimizer.lr, seed: base.run.seed },
    );
    expect(sftUpdates(37, base).flat()).toEqual(plan);
    expect(plan[plan.length - 1].lr).toBeCloseTo(sft.optimizer.lr * sft.min_lr_ratio, 12);
  });
});

describe('teacherCases', () => {
  it("plays the run's capped training cases, or every case of the training faults and none held out", () => {
    const capped = withConfig((c) => {
      c.dataset.max_cases_per_fault = 2;
      c.stages.priming.sft.cases = 'run';
    });
    const { train, eval: held } = runCases(dataset, capped);
    expect(teacherCases(capped, dataset, train)).toEqual(train);
    const all = withConfig((c) => {
      c.dataset.max_cases_per_fault = 2;
      c.stages.priming.sft.cases = 'train_faults';
    });
    const cases = teacherCases(all, dataset, train);
    const trainFaults = new Set(train.map((c) => c.fault_id));
    expect(cases).toEqual(dataset.cases.filter((c) => trainFaults.has(c.fault_id)));
    expect(cases.length).toBeGreaterThan(train.length);
    for (const c of train) expect(cases).toContain(c);
    const heldFaults = new Set(held.map((c) => c.fault_id));
    expect(cases.some((c) => heldFaults.has(c.fault_id))).toBe(false);
  });
});
