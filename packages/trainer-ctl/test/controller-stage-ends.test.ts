/**
 * What a run keeps of each stage and how it tracks learning (issue 26, item 4), through the
 * stage scheduler against a real Redis: real rollout workers play the scripted expert on real
 * Nezha cases (with random detours in training steps, so groups differ, and none in a stage's
 * last step or in greedy plays, so that step makes no update), and the train queue is served by
 * a worker that answers each job and writes a checkpoint directory when the job asks for one.
 * With keep_last 1 and more updates than that, the checkpoint each stage ended with stays, and
 * it holds the policy the stage's held-out evaluation played, also when the stage's last step
 * made no update; the fixed training cases are played greedily at every multiple of
 * logging.track.every_updates, with the figures the env's evaluator gives the expert on them.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import {
  createExpert,
  evaluate,
  ExpertSettingsSchema,
  loadDataset,
  parseEpisodeSettings,
  runEpisode,
  spreadCases,
  type Dataset,
} from '@thinkfl/env';
import { loadChatModel, writeTinyTokenizer, type ChatModel } from '@thinkfl/rollout';
import { Worker } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadRunConfig, type RunConfig } from '../src/config/index';
import { initialState, readMetrics, RedisTransport, runCases, runStages, type RunState } from '../src/controller/index';
import { connectRedis, keys, parseQueueSettings, type TrainJob, type TrainResult } from '../src/queue/index';
import { sftSample, DetourPolicy, DetourSettingsSchema } from '../src/sft/index';
import { startRolloutWorker } from '../src/workers/rollout-worker';
import { checkpointDir, listCheckpoints, writeTrainerState } from '../src/workers/run-files';
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
  scratch = mkdtempSync(join(tmpdir(), 'h26-ends-'));
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

/** The expert with detours in training steps except each stage's last; plain for greedy plays (stage eval). */
async function expertWorker(runId: string, config: RunConfig, lastStep: (stage: string) => number): Promise<void> {
  const episode = parseEpisodeSettings(config.episode);
  const expert = ExpertSettingsSchema.parse({});
  const byId = new Map(dataset.cases.map((c) => [c.id, c]));
  const worker = await startRolloutWorker({
    connection: connectRedis(redis.url),
    runId,
    workerId: `test-${runId}`,
    settings: parseQueueSettings({}),
    concurrency: 2,
    play: async (job) => {
      const c = byId.get(job.caseId)!;
      const rate = job.stage === 'eval' || job.step === lastStep(job.stage) ? 0 : 0.6;
      const policy = new DetourPolicy(createExpert(dataset, expert), DetourSettingsSchema.parse({ rate }), job.seed);
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
}

/** Answers every train job; one that asks for a checkpoint gets a checkpoint directory, as the train worker writes it. */
async function checkpointingTrainer(runId: string, runDir: string): Promise<TrainJob[]> {
  const jobs: TrainJob[] = [];
  const worker = new Worker<TrainJob, TrainResult>(
    keys.trainQueue(runId),
    async (j) => {
      jobs.push(j.data);
      const version = j.data.update + 1;
      const result: TrainResult = { update: j.data.update, version, policyDir: `/policies/v${version}`, metrics: { loss: 0.5 } };
      if (!j.data.checkpoint) return result;
      const dir = checkpointDir(runDir, version);
      mkdirSync(dir, { recursive: true });
      writeTrainerState(dir, version);
      return { ...result, checkpointDir: dir };
    },
    { connection: connectRedis(redis.url), prefix: 'thinkfl' },
  );
  closers.push(() => worker.close());
  return jobs;
}

const updatesOf = (dir: string) => Number(/update-(\d+)$/.exec(basename(dir))![1]);

describe('stage ends and tracking', () => {
  it('keeps the checkpoint of the policy each stage ended on past keep_last, and tracks training cases every N updates', async () => {
    const runId = 'ends';
    const runDir = join(scratch, runId);
    mkdirSync(runDir, { recursive: true });
    const config = structuredClone(base);
    config.run.name = runId;
    config.stages.priming.sft.enabled = false;
    config.stages.priming.steps = 2;
    config.stages.exploration.steps = 4;
    config.stages.exploration.repeats = 1;
    config.stages.refinement.steps = 2;
    config.graders.stage_rewards.exploration = 'stage1';
    config.grpo.group_size = 4;
    config.grpo.cases_per_step = 1;
    config.grpo.max_refill_groups = 0;
    config.grpo.advantage.skip_equal_groups = true;
    config.checkpoints.every_steps = 2;
    config.checkpoints.keep_last = 1;
    config.logging.track = { cases: 2, every_updates: 2 };
    const lastStep = (stage: string) => (stage === 'exploration' ? -1 : 1);
    await expertWorker(runId, config, lastStep);
    const trainJobs = await checkpointingTrainer(runId, runDir);
    const transport = new RedisTransport(redis.url, runId);
    closers.push(() => transport.close());
    const split = runCases(dataset, config);
    const scalars: { step: number; values: Record<string, number> }[] = [];
    const state: RunState = initialState(runId, '/base');
    await runStages(
      {
        config,
        runId,
        runDir,
        dataset,
        train: split.train,
        eval: split.eval.slice(0, 2),
        transport,
        teacher: async () => [],
        stream: { write: () => true },
        print: () => undefined,
        scalars: { scalars: (step, values) => scalars.push({ step, values }) },
      },
      state,
    );

    // Priming's and refinement's last steps made no update: each ended with a checkpoint job.
    const checkpointJobs = trainJobs.filter((j) => j.kind === 'checkpoint');
    expect(checkpointJobs.map((j) => j.stage)).toEqual(expect.arrayContaining(['priming', 'refinement']));
    expect(state.updates).toBeGreaterThan(config.checkpoints.keep_last + 3);
    for (const stage of ['priming', 'exploration', 'refinement']) {
      const kept = state.stage_checkpoints?.[stage];
      expect(kept, stage).toBeDefined();
      expect(existsSync(kept!), stage).toBe(true);
      const evaluated = JSON.parse(readFileSync(join(runDir, `eval-${stage}.json`), 'utf8')) as { policyVersion: number };
      expect(updatesOf(kept!), stage).toBe(evaluated.policyVersion);
    }
    // On disk: the stage-end checkpoints and the newest one; exploration's mid-stage checkpoint was pruned.
    const onDisk = listCheckpoints(runDir).map((c) => c.updates);
    expect(onDisk).toEqual([...new Set(Object.values(state.stage_checkpoints!).map(updatesOf))].sort((a, b) => a - b));
    expect(trainJobs.filter((j) => j.checkpoint).length).toBeGreaterThan(onDisk.length);

    const track = readMetrics(runDir).filter((m) => m.kind === 'track');
    const due = Array.from({ length: Math.floor(state.updates / 2) + 1 }, (_, k) => 2 * k);
    expect(track.map((m) => m.update)).toEqual(due);
    const cases = spreadCases(split.train, 2);
    const expert = await evaluate(dataset, cases, async (c) => {
      const settings = parseEpisodeSettings(config.episode);
      const episode = await runEpisode({
        dataset,
        case: c,
        policy: createExpert(dataset, ExpertSettingsSchema.parse({})),
        protocol: 'rot',
        settings,
      });
      return { answer: episode.answer, episode };
    });
    for (const m of track) {
      expect(m.cases).toBe(2);
      expect(m.formatValid).toBe(1);
      expect(m['perRequest/service/mrr']).toBeCloseTo(expert.per_request.service!.mrr, 9);
      expect(m['perRequest/service/R@1']).toBeCloseTo(expert.per_request.service!.recall[1], 9);
    }
    // TensorBoard gets each point at its metrics line.
    const lines = readMetrics(runDir);
    const points = scalars.filter((s) => 'track/perRequest/service/mrr' in s.values);
    expect(points.map((s) => lines[s.step - 1].kind)).toEqual(track.map(() => 'track'));
    expect(points.map((s) => s.values['track/perRequest/service/mrr'])).toEqual(track.map((m) => m['perRequest/service/mrr']));
  });
});
