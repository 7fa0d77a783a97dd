/**
 * Data parallelism of the engine (issue 24): with 2 ranks (torchrun, gloo on CPU) each rank
 * trains its share of an update's micro-batches, and the update is one process's over the
 * whole batch: loss, every weight's gradient and the updated weights within 1e-5 of a single
 * process, for plain torch (gradients all-reduced), DeepSpeed ZeRO-2, and ZeRO-3 with 4
 * micro-batches (ZeRO-3 accumulates across micro-batches only through its engine's forward).
 * Everything in float32, so that a difference is the split's, not rounding's.
 *
 * The reference is the single-process engine, whose loss and gradient are themselves checked
 * against hand-computed values and finite differences elsewhere (engine-loss-vectors,
 * gradcheck); here what is tested is that splitting changes nothing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TrainEngine, type GrpoStepArgs, type GrpoStepResult, type StepResult } from '../src/engine';
import { readSafetensors, tensorValues } from '../../../testkit/safetensors';
import { prng } from '../../../testkit/prng';
import { maxDiff, TINY_CONFIG, TINY_VOCAB } from './engine-fixtures';

/** 8 ragged sequences in pairs of like length: micro-batches of 2 cost alike, so 2 ranks take 2 of the 4 each. */
const rand = prng(24);
const LENGTHS = [9, 8, 12, 11, 10, 10, 13, 12];
const IDS = LENGTHS.map((n) => [1, ...Array.from({ length: n - 1 }, () => 3 + Math.floor(rand() * (TINY_VOCAB - 3)))]);
const MASK = IDS.map((row) => row.map((_, t) => (t >= 3 ? 1 : 0)));
const ADVANTAGES = [1.2, -0.4, 0.7, -1.5, 0.3, -0.2, 0.9, -0.6];
const TEMPERATURE = IDS.map((_, i) => (i % 2 ? 0.7 : 1.0));
const MICRO = 2;
const TOL = 1e-5;

interface Outcome {
  grpo: GrpoStepResult;
  sft: StepResult;
  weights: Map<string, Float64Array>;
  logs: string;
}

const dir = mkdtempSync(join(tmpdir(), 'engine-dp-'));
const base = join(dir, 'base');

/**
 * An SFT step, then a GRPO step (Adam's state from the first; off-policy old log-probabilities,
 * so the clip acts; a KL term to the base where the policy keeps a whole reference), both
 * returning gradients.
 */
async function train(name: string, ranks: number, deepspeed: Record<string, unknown> | null, kl: boolean): Promise<Outcome> {
  let logs = '';
  const engine = new TrainEngine({ ranks, distributed: deepspeed !== null, onStderr: (t) => (logs += t) });
  try {
    await engine.request('load', { model_dir: base, seed: 0, dtype: 'float32', optimizer: { lr: 5e-3 }, deepspeed });
    // Split, then gathered on rank 0: the same rows as one process computes.
    const mine = (await engine.request('logprobs', { input_ids: IDS, temperature: TEMPERATURE, micro_batch_size: MICRO })).logprobs;
    expect(maxDiff(mine.flat(), current.flat())).toBeLessThanOrEqual(TOL);
    if (kl) await engine.request('set_reference', { tag: 'start' });
    const args: GrpoStepArgs = {
      input_ids: IDS,
      mask: MASK,
      advantages: ADVANTAGES,
      old,
      temperature: TEMPERATURE,
      loss: { eps_low: 0.2, eps_high: 0.28, kl_coef: kl ? 0.05 : 0, aggregation: 'seq-mean-token-mean' },
      micro_batch_size: MICRO,
      gradients: true,
    };
    const sft = await engine.request('sft_step', { input_ids: IDS, mask: MASK, micro_batch_size: MICRO, gradients: true });
    const grpo = await engine.request('grpo_step', args);
    const out = join(dir, name);
    await engine.request('save', { dir: out });
    const weights = new Map([...readSafetensors(join(out, 'model.safetensors'))].map(([k, t]) => [k, tensorValues(t)]));
    return { grpo, sft, weights, logs };
  } finally {
    await engine.shutdown();
  }
}

/** The largest difference between two runs' losses, gradients and weights, each checked within TOL. */
function compare(one: Outcome, split: Outcome): number {
  let worst = 0;
  for (const step of ['grpo', 'sft'] as const) {
    const [a, b] = [one[step], split[step]];
    worst = Math.max(worst, Math.abs(a.loss - b.loss), Math.abs(a.grad_norm! - b.grad_norm!));
    expect(Math.abs(a.loss - b.loss), `${step} loss`).toBeLessThanOrEqual(TOL);
    expect(Math.abs(a.grad_norm! - b.grad_norm!), `${step} grad norm`).toBeLessThanOrEqual(TOL);
    expect(b.tokens).toBe(a.tokens);
    expect(Object.keys(b.gradients!).sort()).toEqual(Object.keys(a.gradients!).sort());
    for (const [name, g] of Object.entries(a.gradients!)) {
      const d = maxDiff(g, b.gradients![name]);
      expect(d, `${step} gradient of ${name}`).toBeLessThanOrEqual(TOL);
      worst = Math.max(worst, d);
    }
  }
  expect([...split.weights.keys()].sort()).toEqual([...one.weights.keys()].sort());
  for (const [name, w] of one.weights) {
    const d = maxDiff(w, split.weights.get(name)!);
    expect(d, `weight ${name}`).toBeLessThanOrEqual(TOL);
    worst = Math.max(worst, d);
  }
  return worst;
}

/** Each rank's logged share of the 4 micro-batches of every step. */
function shares(logs: string): Map<number, number[][]> {
  const out = new Map<number, number[][]>();
  for (const m of logs.matchAll(/rank (\d) of 2: micro-batches \[([\d, ]*)\] of (\d+)/g)) {
    expect(Number(m[3])).toBe(IDS.length / MICRO);
    const rank = Number(m[1]);
    out.set(rank, [...(out.get(rank) ?? []), m[2] ? m[2].split(',').map(Number) : []]);
  }
  return out;
}

let single: Outcome;
let singleNoKl: Outcome;
/** The base model's log-probabilities, and perturbed as the behaviour policy's (old) of every run. */
let current: number[][];
let old: number[][];

beforeAll(async () => {
  const engine = new TrainEngine();
  try {
    await engine.request('create_tiny', { out_dir: base, config: TINY_CONFIG, seed: 5 });
    await engine.request('load', { model_dir: base, dtype: 'float32' });
    current = (await engine.request('logprobs', { input_ids: IDS, temperature: TEMPERATURE })).logprobs;
    old = current.map((row, i) => row.map((v, t) => (t === 0 ? 0 : v + 0.3 * Math.sin(7 * i + t))));
  } finally {
    await engine.shutdown();
  }
  single = await train('single', 1, null, true);
  singleNoKl = await train('single-no-kl', 1, null, false);
  // The steps move the weights and the clip and the KL term act: matching them is not matching a no-op.
  expect(single.grpo.clip_fraction).toBeGreaterThan(0);
  expect(single.grpo.kl).toBeGreaterThan(0);
  expect(maxDiff(single.weights.get('model.embed_tokens.weight')!, singleNoKl.weights.get('model.embed_tokens.weight')!)).toBeGreaterThan(
    1e-4,
  );
}, 300_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const CASES: [string, Record<string, unknown> | null, boolean][] = [
  ['plain torch, gradients all-reduced', null, true],
  ['DeepSpeed ZeRO-2', { zero_optimization: { stage: 2 } }, true],
  // A full fine-tune under ZeRO-3 keeps no whole reference copy (the engine refuses): no KL term here.
  ['DeepSpeed ZeRO-3', { zero_optimization: { stage: 3, stage3_gather_16bit_weights_on_model_save: true } }, false],
];

describe.each(CASES)('2 CPU ranks, %s', (name, deepspeed, kl) => {
  it("trains half the micro-batches on each rank and makes the single process's update", async () => {
    const split = await train(name.replace(/\W+/g, '-'), 2, deepspeed, kl);
    const perRank = shares(split.logs);
    // Three requests split (the log-probabilities, the GRPO step, the SFT step): 2 of the 4 micro-batches each.
    for (const rank of [0, 1]) {
      expect(perRank.get(rank)!.length).toBeGreaterThanOrEqual(3);
      for (const share of perRank.get(rank)!) expect(share).toHaveLength(2);
    }
    perRank.get(0)!.forEach((share, i) => expect([...share, ...perRank.get(1)![i]].sort()).toEqual([0, 1, 2, 3]));
    const worst = compare(kl ? single : singleNoKl, split);
    console.log(
      `[figure] ${name}, 2 ranks x 2 of 4 micro-batches: max |difference| from one process ${worst.toExponential(2)} (loss, gradients, weights)`,
    );
  }, 900_000);
});
