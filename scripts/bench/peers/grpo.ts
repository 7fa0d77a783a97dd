/**
 * GRPO step: TRL's GRPOTrainer against this project's pipeline, on one model, one prompt, the same
 * settings, one optimizer update per step, alternating steps.
 *
 * The project's step is its pipeline's parts in process, without the queues (whose share
 * scripts/bench/control-plane-share.ts measures): the onnx backend generates the group, the
 * rewards become advantages (computeAdvantages, the grpo estimator), the train engine makes the
 * update (grpo_step, with the reference log-probabilities the KL term needs), and the policy is
 * exported to ONNX and loaded by the backend (the sync TRL does not need: it generates with the
 * model it trains).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openOnnxBackend, type OnnxBackend } from '@thinkfl/rollout';
import { computeAdvantages, AdvantageSettingsSchema } from '../../../packages/trainer-ctl/src/algo/core/advantages';
import { TrainEngine } from '../../../packages/trainer-ctl/src/engine/index';
import { LineChild } from './child';
import { alternate, show, spread, table } from './measure';
import type { Prompt } from './models';

export interface GrpoSettings {
  modelDir: string;
  label: string;
  prompt: Prompt;
  groupSize: number;
  maxNewTokens: number;
  temperature: number;
  lr: number;
  /** The tiny-cpu preset's grpo.loss: PPO clip range, KL coefficient (k3), token-mean aggregation. */
  epsLow: number;
  epsHigh: number;
  klCoef: number;
  lora: { r: number; alpha: number; dropout: number; target_modules: string[] } | null;
  threads: number;
  reps: number;
  /** Sequences per forward/backward of the project's engine (workers.train.micro_batch_size). */
  microBatch: number;
  /** Recompute each block's activations in backward, on both sides (workers.train.gradient_checkpointing). */
  gradientCheckpointing: boolean;
  peersPython: string;
}

/** The bench's reward, the same in trl_grpo.py: the share of distinct token ids of a completion. */
const reward = (ids: number[]) => new Set(ids).size / Math.max(ids.length, 1);

interface StepSample {
  step: number;
  generation: number;
  update: number;
  sync: number;
  tokens: number;
}

/** TRL's loss_type whose aggregation is the engine's token-mean over the step (one process, one micro-step). */
const TRL_LOSS_TYPE = 'bnpo';

export async function compareGrpo(s: GrpoSettings): Promise<string> {
  const work = mkdtempSync(join(tmpdir(), 'peers-grpo-'));
  const trl = new LineChild('trl', s.peersPython, [
    join(import.meta.dirname, 'trl_grpo.py'),
    JSON.stringify({
      model_dir: s.modelDir,
      messages: s.prompt.messages,
      group_size: s.groupSize,
      max_new_tokens: s.maxNewTokens,
      temperature: s.temperature,
      lr: s.lr,
      beta: s.klCoef,
      eps_low: s.epsLow,
      eps_high: s.epsHigh,
      loss_type: TRL_LOSS_TYPE,
      lora: s.lora,
      gradient_checkpointing: s.gradientCheckpointing,
      precision: 'float32',
      threads: s.threads,
      seed: 0,
      steps: s.reps + 2,
    }),
  ]);
  const engine = new TrainEngine({ onStderr: () => {} });
  let backend: OnnxBackend | undefined;
  try {
    const trlInfo = await trl.next<{ parameters: number; trainable: number }>();
    const described = await engine.request('load', {
      model_dir: s.modelDir,
      optimizer: { lr: s.lr, weight_decay: 0, max_grad_norm: 1 },
      dtype: 'float32',
      threads: s.threads,
      gradient_checkpointing: s.gradientCheckpointing,
      ...(s.lora && { lora: s.lora }),
    });
    await engine.request('set_reference', { tag: 'bench' });
    backend = await openOnnxBackend({ model_dir: s.modelDir, max_batch: s.groupSize, threads: s.threads });
    const advantages = AdvantageSettingsSchema.parse({ estimator: 'grpo' });
    let version = 0;
    let promptCheck = '';

    const projectStep = async (): Promise<StepSample> => {
      const t0 = performance.now();
      const gens = await backend!.generate(
        Array.from({ length: s.groupSize }, (_, i) => ({
          promptIds: s.prompt.ids,
          sampling: { max_tokens: s.maxNewTokens, temperature: s.temperature, seed: version * 1000 + i },
        })),
      );
      const t1 = performance.now();
      const adv = computeAdvantages(
        gens.map((g) => reward(g.tokenIds)),
        advantages,
      );
      const ids = gens.map((g) => [...s.prompt.ids, ...g.tokenIds]);
      await engine.request('grpo_step', {
        input_ids: ids,
        mask: ids.map((row) => row.map((_, t) => (t >= s.prompt.ids.length ? 1 : 0))),
        advantages: adv,
        lr: s.lr,
        loss: { eps_low: s.epsLow, eps_high: s.epsHigh, kl_coef: s.klCoef, kl_estimator: 'k3', aggregation: 'token-mean' },
        temperature: ids.map(() => s.temperature),
        micro_batch_size: s.microBatch,
      });
      const t2 = performance.now();
      const dir = join(work, `v${++version}`);
      await engine.request('export', { dir, format: 'onnx' }, 30 * 60_000);
      await backend!.reload(dir, version);
      const t3 = performance.now();
      rmSync(join(work, `v${version - 2}`), { recursive: true, force: true });
      return {
        step: t3 - t0,
        generation: t1 - t0,
        update: t2 - t1,
        sync: t3 - t2,
        tokens: gens.reduce((n, g) => n + g.tokenIds.length, 0),
      };
    };
    const trlStep = async (): Promise<StepSample> => {
      const r = await trl.ask<{ step_s: number; generation_s: number; tokens: number; prompt_tokens: number }>('go');
      if (r.prompt_tokens !== s.prompt.ids.length) {
        promptCheck = `TRL's prompt is ${r.prompt_tokens} tokens, the project's ${s.prompt.ids.length}`;
      }
      return {
        step: r.step_s * 1000,
        generation: r.generation_s * 1000,
        update: (r.step_s - r.generation_s) * 1000,
        sync: 0,
        tokens: r.tokens,
      };
    };

    const samples = await alternate(['trl', 'project'], s.reps, (name) => (name === 'trl' ? trlStep() : projectStep()));
    if (promptCheck) throw new Error(`the two sides got different prompts: ${promptCheck}`);
    const row = (name: string, xs: StepSample[]) => {
      const sec = (k: keyof StepSample) => show(spread(xs.map((x) => x[k] / 1000)), 2);
      return [
        name,
        sec('step'),
        sec('generation'),
        sec('update'),
        name.startsWith('trl') ? '-' : sec('sync'),
        show(spread(xs.map((x) => x.tokens)), 0),
        show(spread(xs.map((x) => x.tokens / (x.generation / 1000))), 0),
      ];
    };
    const trlS = samples.get('trl')!;
    const ours = samples.get('project')!;
    const ratio = spread(trlS.map((t, i) => t.step / ours[i].step)).median;
    const lines = [
      `GRPO step, ${s.label}: ${described.parameters} parameters (${described.trainable_parameters} trained${s.lora ? `, LoRA r ${s.lora.r}` : ', full'}; TRL ${trlInfo.trainable} trained), ` +
        `prompt ${s.prompt.ids.length} tokens, group ${s.groupSize}, at most ${s.maxNewTokens} new tokens, temperature ${s.temperature}, float32, ${s.threads} threads, ` +
        `lr ${s.lr}; loss: clip ${s.epsLow}/${s.epsHigh}, KL k3 ${s.klCoef}, token-mean (TRL loss_type ${TRL_LOSS_TYPE}, beta ${s.klCoef}, epsilon ${s.epsLow}, epsilon_high ${s.epsHigh}, scale_rewards group); ` +
        `engine micro-batch ${s.microBatch}, gradient checkpointing ${s.gradientCheckpointing ? 'on' : 'off'} on both; median [min-max] of ${s.reps} steps each after one warm-up`,
      table(
        ['stack', 'step s', 'generation s', 'update s', 'sync s', 'generated tokens', 'generation tokens/s'],
        [row('trl (GRPOTrainer)', trlS), row('project', ours)],
      ),
      `project step time is ${ratio.toFixed(2)}x TRL's (median of per-round ratios; above 1: the project is faster)`,
    ];
    return lines.join('\n');
  } finally {
    await trl.close();
    await backend?.close();
    await engine.shutdown();
    rmSync(work, { recursive: true, force: true });
  }
}
