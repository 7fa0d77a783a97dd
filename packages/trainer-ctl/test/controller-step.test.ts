/**
 * One GRPO step of the controller against a real Redis: real rollout workers (the queue's own
 * worker) play the scripted expert, with and without random detours, on real Nezha cases, and
 * the episodes are tokenized by the tiny tokenizer. The train queue is served by a recording
 * BullMQ worker, since what is under test is the job the controller submits, not the engine.
 */
import { describe, expect, it } from 'vitest';
import type { RunConfig } from '../src/config/index';
import { groupIdOf, RedisTransport, runCases, runGrpoStep, stepCases, type StepContext } from '../src/controller/index';
import { connectRedis, GroupStore } from '../src/queue/index';
import { answeringTrainer, controllerHarness, expertWorker, type Script } from './controller-fixtures';

const h = controllerHarness('h11-step-');
const { closers } = h;
async function setup(runId: string, detourRate: number, edit: (c: RunConfig) => void = () => undefined, script?: Script) {
  const config = structuredClone(h.base);
  config.run.name = runId;
  config.grpo.group_size = 3;
  config.grpo.cases_per_step = 2;
  config.grpo.max_refill_groups = 2;
  edit(config);
  const transport = new RedisTransport(h.redis.url, runId);
  closers.push(() => transport.close());
  const worker = await expertWorker(h, runId, config, () => detourRate, script);
  const trainJobs = await answeringTrainer(h, runId);
  const ctx: StepContext = { config, dataset: h.dataset, runId, train: runCases(h.dataset, config).train, transport };
  return { ctx, worker, trainJobs };
}

/**
 * Fixed episodes, the same three in every group (G = 3), whose stage1 totals are counted by hand
 * in the test that grades them:
 *   sample 0: the true pod first; 4 turns, all well-formed.
 *   sample 1: two other pods, then the true pod (0-based rank 2); 4 turns, the second malformed.
 *   sample 2: no answer; 4 turns, the second and third malformed.
 */
const fixedScript: Script = (index, c) => {
  const turn = (n: number, ok: boolean) => ({
    turn: n,
    offered: ['search_traces', 'print_results'],
    parsed: ok,
    offered_tool: ok,
    args_valid: ok,
  });
  const turns = (...ok: boolean[]) => ok.map((o, n) => turn(n, o));
  const others = h.dataset.topology.pods
    .map((p) => p.pod)
    .filter((p) => p !== c.truth.pod)
    .slice(0, 2);
  return [
    { answer: [{ pod: c.truth.pod }], turns: turns(true, true, true, true) },
    { answer: [...others.map((pod) => ({ pod })), { pod: c.truth.pod }], turns: turns(true, false, true, true) },
    { answer: null, turns: turns(true, false, false, true) },
  ][index];
};
/** The fixed script's stage1 totals in sample order, and their grpo advantages (both counted by hand below). */
const FIXED_TOTALS = [2, 1.55, 0.5];
const FIXED_SD = Math.sqrt(0.5925) + 1e-4;
const FIXED_ADVANTAGES = [0.65 / FIXED_SD, 0.2 / FIXED_SD, -0.85 / FIXED_SD];

describe('runGrpoStep', () => {
  it('skips groups whose samples all score the same, refills up to the bound, and makes no update', async () => {
    const { ctx, trainJobs } = await setup('same', 0);
    const { record, result } = await runGrpoStep(ctx, { stage: 'priming', step: 0, update: 3, policyVersion: 3, checkpoint: false });
    // The expert without detours plays a case the same way every time: no group carries a signal.
    expect(record.groups).toBe(4);
    expect(record.kept_groups).toBe(0);
    expect(record.zero_variance_share).toBe(1);
    expect(record.update).toBeNull();
    expect(result).toBeUndefined();
    expect(trainJobs).toEqual([]);
    expect(record.samples).toBe(12);
    expect(record.format_valid).toBe(1);
    expect(record.graders.format.mean).toBe(1);
    expect(record.tool_calls).toBeGreaterThan(1);
  });

  it('submits one train job with the kept groups and their group-relative advantages', async () => {
    const { ctx, trainJobs, worker } = await setup('detours', 0.6, (c) => {
      c.grpo.group_size = 4;
      c.grpo.cases_per_step = 3;
    });
    const input = { stage: 'priming' as const, step: 2, update: 7, policyVersion: 7, checkpoint: true };
    const groups: number[][] = [];
    const { record, result } = await runGrpoStep(ctx, input);
    expect(result).toEqual({ update: 7, version: 8, policy_dir: '/policies/v8', metrics: { loss: 0.5 } });
    expect(trainJobs).toHaveLength(1);
    const job = trainJobs[0];
    expect(job).toMatchObject({ run_id: 'detours', stage: 'priming', update: 7, kind: 'grpo', checkpoint: true });
    expect(job.samples).toHaveLength(4 * record.kept_groups);
    expect(record.kept_groups).toBeGreaterThan(0);
    expect(record.kept_groups).toBeLessThanOrEqual(3);
    for (let g = 0; g < record.kept_groups; g++) groups.push(job.samples.slice(4 * g, 4 * g + 4).map((s) => s.advantage!));
    for (const adv of groups) {
      expect(Math.abs(adv.reduce((a, b) => a + b, 0))).toBeLessThan(1e-9);
      expect(new Set(adv).size).toBeGreaterThan(1);
    }
    for (const s of job.samples) {
      expect(s.ids.length).toBe(s.mask.length);
      expect(s.old_logprobs).toHaveLength(s.ids.length);
    }
    expect(record.staleness).toEqual({ mean: 0, max: 0 });
    expect(record.train).toEqual({ loss: 0.5 });

    // A step replayed after a kill (same step, same update index) plays nothing again and trains nothing twice.
    const plays = worker.plays();
    const again = await runGrpoStep(ctx, input);
    expect(worker.plays()).toBe(plays);
    expect(trainJobs).toHaveLength(1);
    expect(again.result).toEqual(result);
  });

  it('grades each group with the stage reward in sample order; advantages are the estimator on those totals', async () => {
    const { ctx, trainJobs } = await setup('fixed', 0, (c) => (c.grpo.cases_per_step = 2), fixedScript);
    // What the arithmetic below assumes of tiny-cpu.yaml.
    expect(ctx.config.graders.stage_rewards.priming).toBe('stage1');
    expect(ctx.config.graders.recall).toEqual({ r_max: 10, missing_score: 0 });
    expect(ctx.config.grpo.advantage).toMatchObject({ estimator: 'grpo', std: 'sample', eps: 1e-4 });
    expect(h.dataset.cases.every((c) => c.truth.level === 'pod')).toBe(true);

    const { record } = await runGrpoStep(ctx, { stage: 'priming', step: 0, update: 0, policyVersion: 0, checkpoint: false });
    // stage1 = recall (Eq. 9, R = 1 - r/r_max, r_max 10, absent 0) + format (share of well-formed turns):
    //   sample 0: R = 1 - 0/10 = 1,   F = 4/4 = 1     -> 2
    //   sample 1: R = 1 - 2/10 = 0.8, F = 3/4 = 0.75  -> 1.55
    //   sample 2: R = 0 (absent),     F = 2/4 = 0.5   -> 0.5
    expect(Object.keys(record.graders).sort()).toEqual(['format', 'recall']);
    expect(record.groups).toBe(2);
    expect(record.kept_groups).toBe(2);
    const totals = FIXED_TOTALS;
    expect(record.rewards).toHaveLength(6);
    record.rewards.forEach((r, i) => expect(r).toBeCloseTo(totals[i % 3], 12));
    // grpo: (r_i - mean) / (sample std + eps). mean = 4.05/3 = 1.35; deviations 0.65, 0.2, -0.85;
    // squares 0.4225 + 0.04 + 0.7225 = 1.185; sample variance 1.185/2 = 0.5925; std = sqrt(0.5925) = 0.76974...
    // advantages 0.65/0.76984 = 0.84433, 0.2/0.76984 = 0.25979, -0.85/0.76984 = -1.10413.
    const advantages = FIXED_ADVANTAGES;
    expect(advantages.map((a) => Number(a.toFixed(5)))).toEqual([0.84433, 0.25979, -1.10413]);
    const got = trainJobs.flatMap((j) => j.samples.map((s) => s.advantage!));
    expect(got).toHaveLength(6);
    got.forEach((a, i) => expect(a).toBeCloseTo(advantages[i % 3], 9));
    // shuffle_rewards is off by default: the advantages follow each sample's own reward, and the line says nothing of shuffling.
    expect(ctx.config.grpo.advantage.shuffle_rewards).toBe(false);
    expect(record).not.toHaveProperty('shuffled_rewards');

    // In sample order: the group store holds each slot's samples as played, on its case.
    const { primary } = stepCases('priming', 0, ctx.train, ctx.config);
    const store = new GroupStore(connectRedis(h.redis.url), 'fixed');
    closers.push(() => store.close());
    for (let slot = 0; slot < 2; slot++) {
      const trajectories = await store.read(groupIdOf('priming', 0, slot));
      expect(trajectories.map((t) => t.case_id)).toEqual([primary[slot].id, primary[slot].id, primary[slot].id]);
      expect(trajectories.map((t) => t.episode.answer?.length ?? 0)).toEqual([1, 3, 0]);
    }
    // Another stage, another reward: refinement grades with stage3, the multi-factor grader alone.
    const refined = await runGrpoStep(ctx, { stage: 'refinement', step: 0, update: 1, policyVersion: 1, checkpoint: false });
    expect(Object.keys(refined.record.graders)).toEqual(['multi_factor']);
  });

  it('with shuffle_rewards, gives each group the estimator of its rewards in a seeded permutation and logs the true rewards', async () => {
    const shuffle = (seed: number) => (c: RunConfig) => {
      c.grpo.cases_per_step = 4;
      c.grpo.advantage.shuffle_rewards = true;
      c.run.seed = seed;
    };
    const input = { stage: 'priming' as const, step: 1, update: 0, policyVersion: 0, checkpoint: false };
    // Each group's permutation, read off the train job: sample i got the advantage of the reward at
    // 0-based position p(i) of FIXED_TOTALS. A permutation of the rewards leaves their mean and
    // std alone, so grpo on the permuted rewards gives sample i (r_p(i) - mean)/(std + eps) = FIXED_ADVANTAGES[p(i)].
    const permutations = async (runId: string, seed: number) => {
      const { ctx, trainJobs } = await setup(runId, 0, shuffle(seed), fixedScript);
      const { record } = await runGrpoStep(ctx, input);
      expect(record.kept_groups).toBe(4);
      expect(trainJobs).toHaveLength(1);
      const got = trainJobs[0].samples.map((s) => s.advantage!);
      expect(got).toHaveLength(12);
      expect(record.advantages).toEqual(got);
      const perms = [0, 1, 2, 3].map((g) =>
        got.slice(3 * g, 3 * g + 3).map((a) => {
          const at = FIXED_ADVANTAGES.flatMap((e, j) => (Math.abs(a - e) < 1e-9 ? [j] : []));
          expect(at).toHaveLength(1);
          return at[0];
        }),
      );
      for (const p of perms) expect([...p].sort()).toEqual([0, 1, 2]);
      return { record, perms };
    };

    const { record, perms } = await permutations('shuffled', 0);
    // Some group's advantages are not in its samples' own order.
    expect(perms.some((p) => p.join() !== '0,1,2')).toBe(true);
    // The line keeps the true rewards, in sample order: stage1 = recall + format, as counted in the test above.
    record.rewards.forEach((r, i) => expect(r).toBeCloseTo(FIXED_TOTALS[i % 3], 12));
    expect(record.reward.mean).toBeCloseTo(1.35, 6);
    expect(record.graders.recall.mean).toBeCloseTo((1 + 0.8 + 0) / 3, 6);
    expect(record.graders.format.mean).toBeCloseTo((1 + 0.75 + 0.5) / 3, 6);
    expect(record.shuffled_rewards).toBe(true);

    // Reproducible: another run with the same seed permutes every group the same way; another seed does not.
    expect((await permutations('shuffled-again', 0)).perms).toEqual(perms);
    expect((await permutations('shuffled-seed-1', 1)).perms).not.toEqual(perms);
  });

  it('with shuffle_rewards, still skips groups whose rewards are all equal', async () => {
    const { ctx, trainJobs } = await setup('same-shuffled', 0, (c) => (c.grpo.advantage.shuffle_rewards = true));
    const { record, result } = await runGrpoStep(ctx, { stage: 'priming', step: 0, update: 0, policyVersion: 0, checkpoint: false });
    expect(record.groups).toBe(4);
    expect(record.kept_groups).toBe(0);
    expect(record.zero_variance_share).toBe(1);
    expect(result).toBeUndefined();
    expect(trainJobs).toEqual([]);
  });
});
