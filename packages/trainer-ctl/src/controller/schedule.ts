/**
 * Which cases a GRPO step plays. Each stage walks its own seeded sequence of training cases;
 * step k takes the next cases_per_step of it, and the cases after those are the refills used
 * when groups are skipped. In exploration the sequence is a pool of questions repeated
 * `repeats` times in fresh orders, so each question is played that many times across steps
 * (ThinkFL guided exploration augmentation).
 */
import type { Case } from '@thinkfl/env';
import type { RunConfig, StageName } from '../config/index';
import { shuffled } from './random';

export interface StepCases {
  /** The step's cases, in slot order. */
  primary: Case[];
  /** Candidates, in order, that replace skipped groups (at most grpo.max_refill_groups). */
  refill: Case[];
}

function stageSequence(stage: StageName, train: Case[], config: RunConfig): Case[] {
  const seed = `${config.run.seed}:${stage}`;
  const order = shuffled(train, seed);
  if (stage !== 'exploration') return order;
  const { steps, repeats } = config.stages.exploration;
  const size = Math.min(order.length, Math.max(1, Math.ceil((steps * config.grpo.cases_per_step) / repeats)));
  const pool = order.slice(0, size);
  return Array.from({ length: repeats }, (_, r) => shuffled(pool, `${seed}:${r}`)).flat();
}

export function stepCases(stage: StageName, step: number, train: Case[], config: RunConfig): StepCases {
  if (train.length === 0) throw new Error('the train split has no cases (see dataset.split.eval_fraction)');
  const seq = stageSequence(stage, train, config);
  const c = config.grpo.cases_per_step;
  const at = (i: number) => seq[(step * c + i) % seq.length];
  return {
    primary: Array.from({ length: c }, (_, i) => at(i)),
    refill: Array.from({ length: config.grpo.max_refill_groups }, (_, i) => at(c + i)),
  };
}
