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
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { createExpert, evaluate, ExpertSettingsSchema, parseEpisodeSettings, runEpisode, spreadCases } from '@thinkfl/env';
import { describe, expect, it } from 'vitest';
import { initialState, type RunState } from '../src/run-files/state';
import { readMetrics } from '../src/run-files/metrics-log';
import { RedisTransport, runCases, runStages } from '../src/controller/index';
import { listCheckpoints } from '../src/workers/run-files';
import { answeringTrainer, controllerHarness, expertWorker } from './controller-fixtures';

const h = controllerHarness('h26-ends-');
const { closers } = h;
const updatesOf = (dir: string) => Number(/update-(\d+)$/.exec(basename(dir))![1]);

describe('stage ends and tracking', () => {
  it('keeps the checkpoint of the policy each stage ended on past keep_last, and tracks training cases every N updates', async () => {
    const runId = 'ends';
    const runDir = join(h.scratch, runId);
    mkdirSync(runDir, { recursive: true });
    const config = structuredClone(h.base);
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
    // Detours in training steps except each stage's last; none in greedy plays (stage eval).
    await expertWorker(h, runId, config, (job) => (job.stage === 'eval' || job.step === lastStep(job.stage) ? 0 : 0.6));
    const trainJobs = await answeringTrainer(h, runId, runDir);
    const transport = new RedisTransport(h.redis.url, runId);
    closers.push(() => transport.close());
    const split = runCases(h.dataset, config);
    const scalars: { step: number; values: Record<string, number> }[] = [];
    const state: RunState = initialState(runId, '/base');
    await runStages(
      {
        config,
        runId,
        runDir,
        dataset: h.dataset,
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
      const evaluated = JSON.parse(readFileSync(join(runDir, `eval-${stage}.json`), 'utf8')) as { policy_version: number };
      expect(updatesOf(kept!), stage).toBe(evaluated.policy_version);
    }
    // On disk: the stage-end checkpoints and the newest one; exploration's mid-stage checkpoint was pruned.
    const onDisk = listCheckpoints(runDir).map((c) => c.updates);
    expect(onDisk).toEqual([...new Set(Object.values(state.stage_checkpoints!).map(updatesOf))].sort((a, b) => a - b));
    expect(trainJobs.filter((j) => j.checkpoint).length).toBeGreaterThan(onDisk.length);

    const track = readMetrics(runDir).filter((m) => m.kind === 'track');
    const due = Array.from({ length: Math.floor(state.updates / 2) + 1 }, (_, k) => 2 * k);
    expect(track.map((m) => m.update)).toEqual(due);
    const cases = spreadCases(split.train, 2);
    const expert = await evaluate(h.dataset, cases, async (c) => {
      const settings = parseEpisodeSettings(config.episode);
      const episode = await runEpisode({
        dataset: h.dataset,
        case: c,
        policy: createExpert(h.dataset, ExpertSettingsSchema.parse({})),
        protocol: 'rot',
        settings,
      });
      return { answer: episode.answer, episode };
    });
    for (const m of track) {
      expect(m.cases).toBe(2);
      expect(m.format_valid).toBe(1);
      expect(m['per_request/service/mrr']).toBeCloseTo(expert.per_request.service!.mrr, 9);
      expect(m['per_request/service/R@1']).toBeCloseTo(expert.per_request.service!.recall[1], 9);
    }
    // TensorBoard gets each point at its metrics line.
    const lines = readMetrics(runDir);
    const points = scalars.filter((s) => 'track/per_request/service/mrr' in s.values);
    expect(points.map((s) => lines[s.step - 1].kind)).toEqual(track.map(() => 'track'));
    expect(points.map((s) => s.values['track/per_request/service/mrr'])).toEqual(track.map((m) => m['per_request/service/mrr']));
  });
});
