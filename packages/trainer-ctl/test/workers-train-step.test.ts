/**
 * Train jobs as engine requests: an SFT job's optimizer steps are consecutive slices of its
 * samples, each with its own lr; a GRPO step always names grpo.optimizer.lr, because the
 * engine keeps the last lr it was given (the SFT schedule's floor would otherwise carry over).
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadRunConfig } from '../src/config/index';
import type { TrainJob, TrainSample } from '../src/queue/index';
import { engineStep, mergeSteps } from '../src/workers/index';
import { REPO_ROOT } from '../../../testkit/nezha';

const config = loadRunConfig(join(REPO_ROOT, 'configs', 'tiny-cpu.yaml'), { checkPaths: false }).config;
const samples: TrainSample[] = [0, 1, 2].map((i) => ({
  ids: [1, 2, 3 + i],
  mask: [0, 1, 1],
  advantage: i - 1,
  temperature: [0.7, 1.0, 1.3][i],
}));
const job = (over: Partial<TrainJob>): TrainJob => ({
  run_id: 'r',
  stage: 'priming',
  update: 0,
  kind: 'sft',
  samples,
  checkpoint: false,
  ...over,
});

describe('engineStep', () => {
  it('splits an SFT job into its steps, in order, each with its lr', () => {
    const step = engineStep(
      job({
        sft_steps: [
          { size: 2, lr: 1e-3 },
          { size: 1, lr: 2e-4 },
        ],
      }),
      config,
    );
    expect(step.op).toBe('sft_step');
    const args = step.args as { input_ids: number[][]; lr?: number }[];
    expect(args.map((a) => a.input_ids)).toEqual([
      [
        [1, 2, 3],
        [1, 2, 4],
      ],
      [[1, 2, 5]],
    ]);
    expect(args.map((a) => a.lr)).toEqual([1e-3, 2e-4]);
    expect(() => engineStep(job({ sft_steps: [{ size: 2, lr: 1e-3 }] }), config)).toThrow('sft_steps cover 2 samples');
    expect(() => engineStep(job({ kind: 'grpo', sft_steps: [{ size: 3, lr: 1e-3 }] }), config)).toThrow('sft_steps is for sft jobs only');
  });

  it('gives every GRPO step the configured lr', () => {
    const step = engineStep(job({ kind: 'grpo' }), config);
    expect(step.op).toBe('grpo_step');
    expect((step.args as { lr?: number }).lr).toBe(config.grpo.optimizer.lr);
    expect(config.grpo.optimizer.lr).not.toBe(config.stages.priming.sft.optimizer.lr);
  });

  it("sends each sample's own sampling temperature, not the stage's configured one (issue 8 item 1)", () => {
    const step = engineStep(job({ kind: 'grpo', stage: 'refinement' }), config);
    expect((step.args as { temperature?: number[] }).temperature).toEqual([0.7, 1.0, 1.3]);
    expect(config.generation.temperature.refinement).toBe(0.7);
    const greedy = samples.map((s, i) => ({ ...s, temperature: i === 1 ? 0 : s.temperature }));
    expect(() => engineStep(job({ kind: 'grpo', samples: greedy }), config)).toThrow('samples[1] has sampling temperature 0');
  });

  it('passes the micro-batch token budget to every step only when one is set', () => {
    const sft = engineStep(job({ sft_steps: [{ size: 3, lr: 1e-3 }] }), config).args as { micro_batch_tokens?: number }[];
    expect(sft[0]).not.toHaveProperty('micro_batch_tokens');
    const budget = { ...config, workers: { ...config.workers, train: { ...config.workers.train, micro_batch_tokens: 4096 } } };
    expect((engineStep(job({ kind: 'grpo' }), budget).args as { micro_batch_tokens?: number }).micro_batch_tokens).toBe(4096);
    expect(
      (engineStep(job({ sft_steps: [{ size: 3, lr: 1e-3 }] }), budget).args as { micro_batch_tokens?: number }[])[0].micro_batch_tokens,
    ).toBe(4096);
  });

  it('names a non-finite old log-probability (JSON would turn it into null) instead of sending it', () => {
    const withOld = samples.map((s, i) => ({ ...s, old_logprobs: [0, i === 2 ? -Infinity : -0.5, -0.25] }));
    expect(() => engineStep(job({ kind: 'grpo', samples: withOld }), config)).toThrow('samples[2]: old_logprobs[1] is -Infinity');
    const viaJson = JSON.parse(JSON.stringify(withOld)) as TrainSample[];
    expect(() => engineStep(job({ kind: 'grpo', samples: viaJson }), config)).toThrow('samples[2]: old_logprobs[1] is null');
  });
});

describe('mergeSteps', () => {
  it('adds token counts, averages loss and grad norm, keeps the last step count', () => {
    const merged = mergeSteps([
      { loss: 1, grad_norm: 2, tokens: 10, step: 4 },
      { loss: 3, grad_norm: null, tokens: 5, step: 5 },
    ]);
    expect(merged).toEqual({ loss: 2, grad_norm: 2, tokens: 15, step: 5 });
  });
});
