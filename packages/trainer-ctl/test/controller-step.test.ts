/**
 * One GRPO step of the controller against a real Redis: real rollout workers (the queue's own
 * worker) play the scripted expert, with and without random detours, on real Nezha cases, and
 * the episodes are tokenized by the tiny tokenizer. The train queue is served by a recording
 * BullMQ worker, since what is under test is the job the controller submits, not the engine.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createExpert, ExpertSettingsSchema, loadDataset, parseEpisodeSettings, runEpisode, type Dataset } from '@thinkfl/env';
import { loadChatModel, writeTinyTokenizer, type ChatModel } from '@thinkfl/rollout';
import { gradeGroup } from '@thinkfl/graders';
import { Worker } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadRunConfig, type RunConfig } from '../src/config/index';
import { computeAdvantages, keepGroup } from '../src/grpo/advantages';
import { groupIdOf, RedisTransport, runCases, runGrpoStep, stepCases, type StepContext } from '../src/controller/index';
import { connectRedis, GroupStore, keys, parseQueueSettings, type TrainJob, type TrainResult } from '../src/queue/index';
import { sftSample, DetourPolicy, DetourSettingsSchema } from '../src/sft/index';
import { startRolloutWorker, type RolloutWorker } from '../src/workers/rollout-worker';
import { ensureNezhaDataset, REPO_ROOT } from '../../../testkit/nezha';
import { startRedis, type TestRedis } from '../../../testkit/redis';

let redis: TestRedis;
let dataset: Dataset;
let chat: ChatModel;
let base: RunConfig;
let scratch: string;
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  const dir = await ensureNezhaDataset();
  scratch = mkdtempSync(join(tmpdir(), 'h11-step-'));
  await writeTinyTokenizer(join(scratch, 'tok'), dir);
  [redis, dataset] = await Promise.all([startRedis(), loadDataset(dir)]);
  chat = loadChatModel(join(scratch, 'tok'));
  base = loadRunConfig(join(REPO_ROOT, 'configs', 'tiny-cpu.yaml'), { checkPaths: false }).config;
});

afterAll(async () => {
  for (const close of closers.reverse()) await close();
  await redis?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

/** A rollout worker playing the expert; detourRate > 0 makes samples of a group differ (seeded per job). */
async function expertWorker(runId: string, config: RunConfig, detourRate: number): Promise<{ plays: () => number }> {
  const settings = parseQueueSettings({});
  const episode = parseEpisodeSettings(config.episode);
  const expert = ExpertSettingsSchema.parse({ dMax: episode.dMax });
  const byId = new Map(dataset.cases.map((c) => [c.id, c]));
  let plays = 0;
  const worker: RolloutWorker = await startRolloutWorker({
    connection: connectRedis(redis.url),
    runId,
    workerId: `test-${runId}`,
    settings,
    concurrency: 2,
    play: async (job) => {
      plays++;
      const c = byId.get(job.caseId)!;
      const policy = new DetourPolicy(createExpert(dataset, expert), DetourSettingsSchema.parse({ rate: detourRate }), job.seed);
      const record = await runEpisode({ dataset, case: c, policy, protocol: 'rot', settings: episode });
      const { ids, mask } = sftSample({ case: c, record, tools: policy.firstTools, untrainedTurns: [] }, chat);
      return {
        groupId: job.groupId,
        caseId: job.caseId,
        sampleIndex: job.sampleIndex,
        policyVersion: job.policyVersion,
        ids,
        mask,
        logprobs: mask.map((m) => (m ? -1 : 0)),
        temperature: job.temperature,
        episode: record,
        timing: { generateMs: 0, toolsMs: record.timing.wallMs, wallMs: record.timing.wallMs },
      };
    },
  });
  closers.push(() => worker.close());
  return { plays: () => plays };
}

/** Serves the run's train queue by recording each job and answering with a result. */
async function recordingTrainer(runId: string): Promise<TrainJob[]> {
  const jobs: TrainJob[] = [];
  const worker = new Worker<TrainJob, TrainResult>(
    keys.trainQueue(runId),
    async (j) => {
      jobs.push(j.data);
      return { update: j.data.update, version: j.data.update + 1, policyDir: `/policies/v${j.data.update + 1}`, metrics: { loss: 0.5 } };
    },
    { connection: connectRedis(redis.url), prefix: 'thinkfl' },
  );
  closers.push(() => worker.close());
  return jobs;
}

async function setup(runId: string, detourRate: number, edit: (c: RunConfig) => void = () => undefined) {
  const config = structuredClone(base);
  config.run.name = runId;
  config.grpo.group_size = 3;
  config.grpo.cases_per_step = 2;
  config.grpo.max_refill_groups = 2;
  edit(config);
  const transport = new RedisTransport(redis.url, runId);
  closers.push(() => transport.close());
  const worker = await expertWorker(runId, config, detourRate);
  const trainJobs = await recordingTrainer(runId);
  const ctx: StepContext = { config, dataset, runId, train: runCases(dataset, config).train, transport };
  return { ctx, worker, trainJobs };
}

describe('runGrpoStep', () => {
  it('skips groups whose samples all score the same, refills up to the bound, and makes no update', async () => {
    const { ctx, trainJobs } = await setup('same', 0);
    const { record, result } = await runGrpoStep(ctx, { stage: 'priming', step: 0, update: 3, policyVersion: 3, checkpoint: false });
    // The expert without detours plays a case the same way every time: no group carries a signal.
    expect(record.groups).toBe(4);
    expect(record.keptGroups).toBe(0);
    expect(record.zeroVarianceShare).toBe(1);
    expect(record.update).toBeNull();
    expect(result).toBeUndefined();
    expect(trainJobs).toEqual([]);
    expect(record.samples).toBe(12);
    expect(record.formatValid).toBe(1);
    expect(record.graders.format.mean).toBe(1);
    expect(record.toolCalls).toBeGreaterThan(1);
  });

  it('submits one train job with the kept groups and their group-relative advantages', async () => {
    const { ctx, trainJobs, worker } = await setup('detours', 0.6, (c) => {
      c.grpo.group_size = 4;
      c.grpo.cases_per_step = 3;
    });
    const input = { stage: 'priming' as const, step: 2, update: 7, policyVersion: 7, checkpoint: true };
    const groups: number[][] = [];
    const { record, result } = await runGrpoStep(ctx, input);
    expect(result).toEqual({ update: 7, version: 8, policyDir: '/policies/v8', metrics: { loss: 0.5 } });
    expect(trainJobs).toHaveLength(1);
    const job = trainJobs[0];
    expect(job).toMatchObject({ runId: 'detours', stage: 'priming', update: 7, kind: 'grpo', checkpoint: true });
    expect(job.samples).toHaveLength(4 * record.keptGroups);
    expect(record.keptGroups).toBeGreaterThan(0);
    expect(record.keptGroups).toBeLessThanOrEqual(3);
    for (let g = 0; g < record.keptGroups; g++) groups.push(job.samples.slice(4 * g, 4 * g + 4).map((s) => s.advantage!));
    for (const adv of groups) {
      expect(Math.abs(adv.reduce((a, b) => a + b, 0))).toBeLessThan(1e-9);
      expect(new Set(adv).size).toBeGreaterThan(1);
    }
    for (const s of job.samples) {
      expect(s.ids.length).toBe(s.mask.length);
      expect(s.oldLogprobs).toHaveLength(s.ids.length);
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
    const { ctx, trainJobs } = await setup('refine', 0.6, (c) => {
      c.grpo.cases_per_step = 2;
      c.grpo.max_refill_groups = 3;
    });
    const { record } = await runGrpoStep(ctx, { stage: 'refinement', step: 0, update: 0, policyVersion: 0, checkpoint: false });
    expect(Object.keys(record.graders)).toEqual(['multi_factor']);
    const { primary, refill } = stepCases('refinement', 0, ctx.train, ctx.config);
    const store = new GroupStore(connectRedis(redis.url), 'refine');
    closers.push(() => store.close());
    const expected: number[] = [];
    for (let slot = 0; slot < record.groups; slot++) {
      const trajectories = await store.read(groupIdOf('refinement', 0, slot));
      const c = slot < primary.length ? primary[slot] : refill[slot - primary.length];
      expect(trajectories.map((t) => t.caseId)).toEqual([c.id, c.id, c.id]);
      // The route grader (Eq. 10) measures against the episodes' D_max, episode.d_max.
      const { stage_rewards, ...graders } = ctx.config.graders;
      const settings = { ...graders, route: { ...graders.route, dMax: ctx.config.episode.dMax } };
      const grade = await gradeGroup(trajectories.map((t) => t.episode), { truth: c.truth, questionId: c.id, settings }, stage_rewards.refinement);
      if (keepGroup(grade.totals, ctx.config.grpo.advantage)) expected.push(...computeAdvantages(grade.totals, ctx.config.grpo.advantage));
    }
    expect(record.keptGroups * 3).toBe(expected.length);
    const got = trainJobs.flatMap((j) => j.samples.map((s) => s.advantage!));
    expect(got).toHaveLength(expected.length);
    got.forEach((a, i) => expect(a).toBeCloseTo(expected[i], 9));
  });
});
