/**
 * The controller tests' stand-ins for the model and the engine, around real parts: a real Redis,
 * the real Nezha dataset, the tiny tokenizer and configs/tiny-cpu.yaml. Rollout jobs are played by
 * the queue's own rollout worker with the scripted expert (random detours make a group's samples
 * differ); train jobs are answered by a BullMQ worker that records them, since what is under test
 * is what the controller submits and keeps, not the engine.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  type Case,
  createExpert,
  type Dataset,
  type EpisodeRecord,
  ExpertSettingsSchema,
  loadDataset,
  parseEpisodeSettings,
  runEpisode,
} from '@thinkfl/env';
import { type ChatModel, loadChatModel, writeTinyTokenizer } from '@thinkfl/rollout';
import { Worker } from 'bullmq';
import { afterAll, beforeAll } from 'vitest';
import { loadRunConfig, type RunConfig } from '../src/config/index';
import { connectRedis, keys, parseQueueSettings, type RolloutJob, type TrainJob, type TrainResult } from '../src/queue/index';
import { DetourPolicy, DetourSettingsSchema } from '@thinkfl/env';
import { sftSample } from '../src/sft/index';
import { startRolloutWorker } from '../src/workers/rollout-worker';
import { checkpointDir, writeTrainerState } from '../src/workers/run-files';
import { ensureNezhaDataset, REPO_ROOT } from '../../../testkit/nezha';
import { startRedis, type TestRedis } from '../../../testkit/redis';

export interface ControllerHarness {
  redis: TestRedis;
  dataset: Dataset;
  chat: ChatModel;
  /** configs/tiny-cpu.yaml, for each test to clone and edit. */
  base: RunConfig;
  scratch: string;
  /** Closed in reverse order after the file's tests. */
  closers: (() => Promise<void>)[];
}

/** The harness of a test file: set up before its tests, torn down after them. */
export function controllerHarness(scratchPrefix: string): ControllerHarness {
  const h = { closers: [] as (() => Promise<void>)[] } as ControllerHarness;
  beforeAll(async () => {
    const dir = await ensureNezhaDataset();
    h.scratch = mkdtempSync(join(tmpdir(), scratchPrefix));
    await writeTinyTokenizer(join(h.scratch, 'tok'), dir);
    [h.redis, h.dataset] = await Promise.all([startRedis(), loadDataset(dir)]);
    h.chat = loadChatModel(join(h.scratch, 'tok'));
    h.base = loadRunConfig(join(REPO_ROOT, 'configs', 'tiny-cpu.yaml'), { checkPaths: false }).config;
  });
  afterAll(async () => {
    for (const close of h.closers.reverse()) await close();
    await h.redis?.stop();
    if (h.scratch) rmSync(h.scratch, { recursive: true, force: true });
  });
  return h;
}

/** What a fixed episode replaces in the expert's record: sample `index` of a group on case `c`. */
export type Script = (index: number, c: Case) => Pick<EpisodeRecord, 'answer' | 'turns'>;

/**
 * A rollout worker playing the expert with the detour rate `detourRate(job)` (seeded per job).
 * With a script, the episode the controller grades is the expert's with the script's answer and
 * turns (the tokens stay the expert's): fixed episodes whose rewards a test counts by hand.
 */
export async function expertWorker(
  h: ControllerHarness,
  runId: string,
  config: RunConfig,
  detourRate: (job: RolloutJob) => number,
  script?: Script,
): Promise<{ plays: () => number }> {
  const episode = parseEpisodeSettings(config.episode);
  const expert = ExpertSettingsSchema.parse({});
  const byId = new Map(h.dataset.cases.map((c) => [c.id, c]));
  let plays = 0;
  const worker = await startRolloutWorker({
    connection: connectRedis(h.redis.url),
    runId,
    workerId: `test-${runId}`,
    settings: parseQueueSettings({}),
    concurrency: 2,
    play: async (job) => {
      plays++;
      const c = byId.get(job.case_id)!;
      const policy = new DetourPolicy(createExpert(h.dataset, expert), DetourSettingsSchema.parse({ rate: detourRate(job) }), job.seed);
      const record = await runEpisode({ dataset: h.dataset, case: c, policy, protocol: 'rot', settings: episode });
      const { ids, mask } = sftSample({ case: c, record, tools: policy.firstTools, untrainedTurns: [] }, h.chat);
      return {
        group_id: job.group_id,
        case_id: job.case_id,
        sample_index: job.sample_index,
        policy_version: job.policy_version,
        ids,
        mask,
        logprobs: mask.map((m) => (m ? -1 : 0)),
        temperature: job.temperature,
        episode: script ? { ...record, ...script(job.sample_index, c) } : record,
        timing: { generate_ms: 0, tools_ms: record.timing.wall_ms, wall_ms: record.timing.wall_ms },
      };
    },
  });
  h.closers.push(() => worker.close());
  return { plays: () => plays };
}

/**
 * Serves the run's train queue: records each job and answers it with a result. With `runDir`, a
 * job that asks for a checkpoint gets a checkpoint directory there, as the train worker writes it.
 */
export async function answeringTrainer(h: ControllerHarness, runId: string, runDir?: string): Promise<TrainJob[]> {
  const jobs: TrainJob[] = [];
  const worker = new Worker<TrainJob, TrainResult>(
    keys.trainQueue(runId),
    async (j) => {
      jobs.push(j.data);
      const version = j.data.update + 1;
      const result: TrainResult = { update: j.data.update, version, policy_dir: `/policies/v${version}`, metrics: { loss: 0.5 } };
      if (!runDir || !j.data.checkpoint) return result;
      const dir = checkpointDir(runDir, version);
      mkdirSync(dir, { recursive: true });
      writeTrainerState(dir, version);
      return { ...result, checkpoint_dir: dir };
    },
    { connection: connectRedis(h.redis.url), prefix: 'thinkfl' },
  );
  h.closers.push(() => worker.close());
  return jobs;
}
