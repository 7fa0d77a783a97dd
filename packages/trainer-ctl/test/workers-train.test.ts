/**
 * The train worker on a real redis-server, a real tiny model and real Nezha episodes: a GRPO
 * job publishes version update+1 with an exported policy the onnx backend loads; a retried job
 * returns its stored result without a second update; updates run in order; a new worker
 * resumes from the checkpoint; an SFT job of several optimizer steps is one update. Then the rollout side syncs to the published versions, and a
 * version that never comes fails the sync with a clear error after its hard timeout; episodes
 * played at the same time decode as one batch. An engine
 * SIGKILLed during an update is started again and the update gives the unbroken run's loss;
 * with engine_restarts 0 the job fails for good. A worker resumed from a checkpoint that
 * retention then deletes (what checkpoints.keep_last does a few updates later) needs nothing
 * from it: it goes on updating, exporting with the model's tokenizer files, checkpointing and
 * restarting a killed engine, for a full model, a LoRA adapter and DeepSpeed ZeRO-2 on 2 CPU
 * ranks, and every update's result names the checkpoint its engine came from (retention keeps it).
 * Each GRPO stage starts from a new optimizer (grpo.optimizer.reset): the first GRPO update
 * equals a new engine's on the SFT checkpoint, and a run resumed inside a stage ends with the
 * unbroken run's weights.
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Dataset } from '@thinkfl/env';
import type { LoadedRunConfig } from '../src/config/index';
import { parseQueueSettings, PolicyRegistry, TrainQueue, type RolloutJob, type TrainJob, type TrainSample } from '../src/queue/index';
import {
  checkpointDir,
  createEpisodePlayer,
  listCheckpoints,
  startTrainWorker,
  TRAINER_STATE_FILE,
  type TrainWorker,
} from '../src/workers/index';
import { REPO_ROOT } from '../../../testkit/nezha';
import { readSafetensors, tensorValues } from '../../../testkit/safetensors';
import { closeGround, grpoJob, openTrainGround, startTrainer, writeRunConfig, type TrainGround } from './workers-fixtures';

const RUN = 'train-test';
let ground: TrainGround;
let dataset: Dataset;
let loaded: LoadedRunConfig;
let samples: TrainSample[];
let model: string;
const logs: string[] = [];
const settings = parseQueueSettings({ prefix: 'thinkfl', pollMs: 50 });

async function startWorker(onEngineDeath?: (e: Error) => void): Promise<TrainWorker> {
  return startTrainer(ground.conn, RUN, settings, loaded, { log: (l) => logs.push(l), onEngineDeath });
}

/** A rollout job of priming step 3 on the dataset's first case, at temperature 1. */
const rolloutJob = (groupId: string, sampleIndex: number, policyVersion: number, seed: number): RolloutJob => ({
  run_id: RUN,
  stage: 'priming',
  step: 3,
  group_id: groupId,
  case_id: dataset.cases[0].id,
  sample_index: sampleIndex,
  policy_version: policyVersion,
  temperature: 1,
  seed,
});

const job = (update: number, checkpoint = false): TrainJob => grpoJob(RUN, samples, update, checkpoint);

beforeAll(async () => {
  // Samples: two real expert episodes, tokenized with the tiny model's own chat template, as a group of 2.
  ground = await openTrainGround('train', RUN, 2, [1, -1]);
  ({ dataset, loaded, model, samples } = ground);
}, 600_000);
afterAll(() => closeGround(ground));

describe('train worker', () => {
  it('publishes version update+1 per update, answers a retried update from its stored result, resumes from a checkpoint', async () => {
    const registry = new PolicyRegistry(ground.conn, RUN);
    const queue = new TrainQueue(ground.conn, RUN, settings);
    let worker = await startWorker();
    expect(worker.updates).toBe(0);
    const v0 = await registry.current();
    expect(v0).toEqual({ version: 0, dir: join(loaded.runDir, 'policies', 'v0') });
    expect(existsSync(join(v0!.dir, 'onnx', 'model.onnx'))).toBe(true);

    await queue.submit(job(0));
    const first = await queue.waitResult(0, 120_000);
    expect(first).toMatchObject({ update: 0, version: 1, policy_dir: join(loaded.runDir, 'policies', 'v1') });
    expect(first.metrics.step).toBe(1);
    expect(Number.isFinite(first.metrics.loss)).toBe(true);
    expect(existsSync(join(first.policy_dir!, 'onnx', 'model.onnx'))).toBe(true);
    expect(existsSync(join(first.policy_dir!, 'tokenizer.json'))).toBe(true);
    expect(await registry.current()).toEqual({ version: 1, dir: first.policy_dir });

    // A retry of update 0 (its BullMQ job gone, as after a lost result) trains nothing.
    await queue.forget(0);
    await queue.submit(job(0));
    expect(await queue.waitResult(0, 120_000)).toEqual(first);
    expect(logs.some((l) => l.includes('update 0 was done before'))).toBe(true);
    await queue.submit(job(1, true));
    const second = await queue.waitResult(1, 120_000);
    expect(second.version).toBe(2);
    expect(second.metrics.step).toBe(2); // one optimizer step per update: the retry took none
    expect(JSON.parse(readFileSync(join(second.checkpoint_dir!, TRAINER_STATE_FILE), 'utf8')).updates).toBe(2);

    // Updates run in order: a job from the future fails at once, saying which update is due.
    await queue.submit(job(5));
    await expect(queue.waitResult(5, 120_000)).rejects.toThrow(
      /failed after 1 attempt\(s\): train job update 5: the engine has done 2 updates; submit update 2 first/,
    );

    // A new worker on the same run directory resumes from the checkpoint (optimizer state too).
    await worker.close();
    worker = await startWorker();
    expect(worker.updates).toBe(2);
    expect((await registry.current())?.version).toBe(2);
    expect(await queue.queue.getJob('train-test.update.5')).toBeUndefined();
    await queue.submit(job(2));
    const third = await queue.waitResult(2, 120_000);
    expect(third).toMatchObject({ update: 2, version: 3 });
    expect(third.metrics.step).toBe(3);

    // An SFT update of several optimizer steps (sft_steps): each its own slice and lr, one export.
    const sft: TrainJob = {
      run_id: RUN,
      stage: 'priming',
      update: 3,
      kind: 'sft',
      samples,
      checkpoint: false,
      sft_steps: [
        { size: 1, lr: 1e-3 },
        { size: 1, lr: 5e-4 },
      ],
    };
    await queue.submit(sft);
    const fourth = await queue.waitResult(3, 120_000);
    expect(fourth).toMatchObject({ update: 3, version: 4 });
    expect(fourth.metrics.step).toBe(5);
    expect(fourth.metrics.tokens).toBe(samples.reduce((a, x) => a + x.mask.reduce((b, m) => b + m, 0), 0));
    expect(await registry.current()).toEqual({ version: 4, dir: fourth.policy_dir });
    // Steps that do not cover the samples fail at once, naming the job.
    await queue.submit({ ...sft, update: 4, sft_steps: [{ size: 1, lr: 1e-3 }] });
    await expect(queue.waitResult(4, 120_000)).rejects.toThrow(
      /train job update 4: sft_steps cover 1 samples in steps of positive sizes; the job has 2/,
    );
    await queue.forget(4);
    // An SFT update before SFT's last (export false) trains, and exports and publishes nothing.
    await queue.submit({ ...sft, update: 4, export: false });
    const fifth = await queue.waitResult(4, 120_000);
    expect(fifth).toMatchObject({ update: 4, version: 5 });
    expect(fifth.metrics.step).toBe(7);
    expect(fifth.policy_dir).toBeUndefined();
    expect(fifth.metrics.export_ms).toBeUndefined();
    expect(existsSync(join(loaded.runDir, 'policies', 'v5'))).toBe(false);
    expect(await registry.current()).toEqual({ version: 4, dir: fourth.policy_dir });
    await worker.close();
    await queue.close();
  }, 600_000);

  it('syncs the rollout side to a published version, and fails a sync that times out with a clear error', async () => {
    const registry = new PolicyRegistry(ground.conn, RUN);
    const published = await registry.current();
    expect(published?.version).toBe(4);
    const player = await createEpisodePlayer({ config: loaded.config, registry, syncTimeoutMs: 500 });
    const rollout = (policyVersion: number) => rolloutJob('sync-g', 0, policyVersion, 7);
    const t = await player.play(rollout(4));
    expect(player.version).toBe(4);
    expect(t.policy_version).toBe(4);
    expect(t.mask.some((m) => m === 1)).toBe(true);
    await expect(player.play(rollout(5))).rejects.toThrow(
      `weight sync timed out after 500 ms: waiting for policy version 5 of run ${RUN}, newest published is version 4 (${published!.dir}); is the train worker running?`,
    );
    await player.close();
  }, 300_000);

  it('decodes the episodes a rollout worker plays at the same time as one batch', async () => {
    const registry = new PolicyRegistry(ground.conn, RUN);
    const version = (await registry.current())!.version;
    const player = await createEpisodePlayer({ config: loaded.config, registry, syncTimeoutMs: 60_000 });
    const rollout = (sampleIndex: number) => rolloutJob('batch-g', sampleIndex, version, 11 + sampleIndex);
    // Rows of every decode step that reaches onnxruntime: on the export's decode graph, a step
    // feeds one token a row on a prompt's prefix (a prefill feeds the prompt's tokens past what
    // the prompt cache holds, on an empty or a cached prefix), counting the slots with a position.
    const sessions = (ort.InferenceSession as unknown as { prototype: ort.InferenceSession }).prototype;
    const run = sessions.run;
    const rows: number[] = [];
    const spy = vi.spyOn(sessions, 'run').mockImplementation(function (this: ort.InferenceSession, ...args: Parameters<typeof run>) {
      const feeds = args[0] as Record<string, ort.Tensor>;
      expect(feeds.prefix_mask).toBeDefined();
      if (feeds.input_ids.dims[1] === 1 && !(feeds.prefix_mask.data as Float32Array).every((x) => x === -Infinity)) {
        rows.push([...(feeds.position_ids.data as BigInt64Array)].filter((p) => p > 0n).length);
      }
      return run.apply(this, args);
    });
    try {
      // As the worker's BullMQ concurrency 2 calls the player.
      const played = await Promise.all([player.play(rollout(0)), player.play(rollout(1))]);
      expect(played.map((t) => t.mask.some((m) => m === 1))).toEqual([true, true]);
      expect(Math.max(...rows)).toBe(2);
    } finally {
      spy.mockRestore();
      await player.close();
    }
  }, 300_000);

  it('fails a malformed job at once; an engine killed in the middle of an update is started again and the job gives the unbroken result', async () => {
    const queue = new TrainQueue(ground.conn, RUN, settings);
    let worker = await startWorker();
    // Resumed from the checkpoint after update 1: update 2 is due again.
    expect(worker.updates).toBe(2);
    // A malformed job is not retried: it fails at once, naming the sample.
    await queue.submit({ ...job(2), samples: [samples[0], { ...samples[1], advantage: undefined }] });
    await expect(queue.waitResult(2, 120_000)).rejects.toThrow(
      /failed after 1 attempt\(s\): train job update 2: samples\[1\] has no advantage \(required for grpo\)/,
    );
    // Unbroken: updates 2 and 3 one after the other.
    await queue.submit(job(2));
    await queue.waitResult(2, 120_000);
    await queue.submit(job(3));
    const unbroken = await queue.waitResult(3, 120_000);
    await worker.close();

    // Again from the checkpoint, and the engine SIGKILLed once update 3 is running: the new
    // engine starts from the checkpoint, takes update 2 again from its job, then makes update 3.
    worker = await startWorker();
    expect(worker.updates).toBe(2);
    await queue.submit(job(2));
    await queue.waitResult(2, 120_000);
    const killedPid = worker.enginePid!;
    const at = logs.length;
    await queue.submit(job(3));
    while ((await queue.queue.getJobState('train-test.update.3')) !== 'active') await new Promise((r) => setTimeout(r, 5));
    process.kill(killedPid, 'SIGKILL');
    const restarted = await queue.waitResult(3, 120_000);
    expect(worker.enginePid).not.toBe(killedPid);
    expect(logs.slice(at).some((l) => /engine died during update 3 .*restarting it from the latest checkpoint \(1 of 2\)/.test(l))).toBe(
      true,
    );
    expect(restarted.metrics.step).toBe(unbroken.metrics.step);
    expect(restarted.metrics.loss).toBe(unbroken.metrics.loss);
    expect(restarted.metrics.grad_norm).toBe(unbroken.metrics.grad_norm);
    await worker.close();
    await queue.close();
  }, 600_000);

  it("with engine_restarts 0 a job on a dead engine fails for good and the worker's owner is told", async () => {
    const deaths: Error[] = [];
    const c = loaded.config;
    const config = { ...c, workers: { ...c.workers, train: { ...c.workers.train, engine_restarts: 0 } } };
    const worker = await startTrainWorker({
      connection: ground.conn,
      runId: RUN,
      workerId: 'trainer',
      settings,
      config,
      runDir: loaded.runDir,
      log: (l) => logs.push(l),
      onEngineDeath: (e) => deaths.push(e),
    });
    const queue = new TrainQueue(ground.conn, RUN, settings);
    expect(worker.updates).toBe(2);
    process.kill(worker.enginePid!, 'SIGKILL');
    await queue.submit(job(2));
    await expect(queue.waitResult(2, 120_000)).rejects.toThrow(
      /train job train-test.update.2 failed after 1 attempt\(s\): train engine died \(workers.train.engine_restarts 0\): .*SIGKILL/,
    );
    expect(deaths).toHaveLength(1);
    await worker.close();
    await queue.close();
  }, 300_000);
});

const VARIANTS = {
  full: { model: '', train: '{ autocast: auto }' },
  lora: { model: 'lora: { r: 4, alpha: 8, target_modules: [q_proj, v_proj] }', train: '{ autocast: auto }' },
  'deepspeed zero-2': { model: '', train: `{ ranks: 2, deepspeed_config: ${join(REPO_ROOT, 'configs', 'deepspeed', 'zero2.json')} }` },
};

describe.each(Object.entries(VARIANTS))('train worker resumed from a checkpoint that retention then deletes (%s)', (name, v) => {
  it('goes on updating, exporting and checkpointing, and restarts a killed engine', async () => {
    const run = `retention-${name.replace(/\W+/g, '-')}`;
    const { config, runDir } = writeRunConfig(ground.dir, run, model, '', { file: `${run}.yaml`, model: v.model, train: v.train });
    const logs: string[] = [];
    const start = () =>
      startTrainWorker({ connection: ground.conn, runId: run, workerId: 'trainer', settings, config, runDir, log: (l) => logs.push(l) });
    const job = (update: number): TrainJob => grpoJob(run, samples, update, true);
    const queue = new TrainQueue(ground.conn, run, settings);
    try {
      let worker = await start();
      for (const u of [0, 1]) {
        await queue.submit(job(u));
        expect((await queue.waitResult(u, 300_000)).engine_checkpoint).toBeUndefined();
      }
      await worker.close();

      worker = await start();
      expect(worker.updates).toBe(2);
      const loaded = checkpointDir(runDir, 2);
      expect(logs.some((l) => l.includes(`engine loaded checkpoint ${loaded}`))).toBe(true);
      // Retention's work, keep_last updates later: the checkpoints the engine came from are gone.
      rmSync(loaded, { recursive: true });
      rmSync(checkpointDir(runDir, 1), { recursive: true });

      await queue.submit(job(2));
      const third = await queue.waitResult(2, 300_000);
      expect(third).toMatchObject({ update: 2, version: 3, engine_checkpoint: loaded });
      // The export carries the model's tokenizer files; the checkpoint is whole and holds them too.
      const tokenizer = readFileSync(join(model, 'tokenizer.json'), 'utf8');
      const exported = name === 'lora' ? join(third.policy_dir!, 'merged') : third.policy_dir!;
      expect(readFileSync(join(exported, 'tokenizer.json'), 'utf8')).toBe(tokenizer);
      expect(readFileSync(join(third.checkpoint_dir!, 'tokenizer.json'), 'utf8')).toBe(tokenizer);
      expect(existsSync(join(third.checkpoint_dir!, 'trainer-state.json'))).toBe(true);
      expect(listCheckpoints(runDir).map((c) => c.updates)).toEqual([3]);

      // An engine killed now restarts from checkpoint 3 and makes update 3; then checkpoint 3 goes too.
      process.kill(worker.enginePid!, 'SIGKILL');
      await queue.submit(job(3));
      const fourth = await queue.waitResult(3, 300_000);
      expect(fourth).toMatchObject({ update: 3, version: 4, engine_checkpoint: checkpointDir(runDir, 3) });
      expect(logs.some((l) => /engine died during update 3 .*restarting it from the latest checkpoint/.test(l))).toBe(true);
      rmSync(checkpointDir(runDir, 3), { recursive: true });
      await queue.submit(job(4));
      expect(await queue.waitResult(4, 300_000)).toMatchObject({ update: 4, version: 5 });
      expect(listCheckpoints(runDir).map((c) => c.updates)).toEqual([4, 5]);
      await worker.close();
    } finally {
      await queue.close();
    }
  }, 900_000);
});

/** An exported policy's weights by tensor name. */
const weightsOf = (runDir: string, version: number) => {
  const w = readSafetensors(join(runDir, 'policies', `v${version}`, 'model.safetensors'));
  return new Map([...w].map(([k, t]) => [k, tensorValues(t)]));
};
const maxDiff = (a: Map<string, Float64Array>, b: Map<string, Float64Array>) => {
  expect([...b.keys()].sort()).toEqual([...a.keys()].sort());
  let worst = 0;
  for (const [k, v] of a) v.forEach((x, i) => (worst = Math.max(worst, Math.abs(x - b.get(k)![i]))));
  return worst;
};

describe('a new optimizer for GRPO (grpo.optimizer.reset)', () => {
  /** Updates 0-1 SFT, 2-3 GRPO in priming, 4 GRPO in exploration; a checkpoint after each. */
  const jobOf = (run: string, update: number): TrainJob => ({
    run_id: run,
    stage: update < 4 ? 'priming' : 'exploration',
    update,
    kind: update < 2 ? 'sft' : 'grpo',
    samples,
    checkpoint: true,
  });
  /** A train worker on `run` that makes `updates` in order, then closes; its log lines. */
  async function play(run: string, loadedRun: LoadedRunConfig, updates: number[], job = (u: number) => jobOf(run, u)): Promise<string[]> {
    const lines: string[] = [];
    const worker = await startTrainer(ground.conn, run, settings, loadedRun, { log: (l) => lines.push(l) });
    const queue = new TrainQueue(ground.conn, run, settings);
    try {
      for (const u of updates) {
        await queue.submit(job(u));
        await queue.waitResult(u, 300_000);
      }
    } finally {
      await queue.close();
      await worker.close();
    }
    return lines;
  }
  const resets = (lines: string[]) => lines.flatMap((l) => /optimizer reset before update (\d+)/.exec(l)?.[1] ?? []).map(Number);

  it('starts each GRPO stage from an optimizer with no state, as a new engine does, and a run resumed in a stage ends as an unbroken one', async () => {
    const setup = (run: string, reset?: 'never'): LoadedRunConfig => {
      const l = writeRunConfig(ground.dir, run, model, '', { file: `${run}.yaml`, train: '{ autocast: float32 }' });
      return reset ? { ...l, config: { ...l.config, grpo: { ...l.config.grpo, optimizer: { ...l.config.grpo.optimizer, reset } } } } : l;
    };
    // Unbroken, with the default reset (stage): a new optimizer before updates 2 and 4, logged by worker and engine.
    const unbroken = setup('reset-unbroken');
    const lines = await play('reset-unbroken', unbroken, [0, 1, 2, 3, 4]);
    expect(unbroken.config.grpo.optimizer.reset).toBe('stage');
    expect(resets(lines)).toEqual([2, 4]);
    expect(lines.some((l) => l.includes('optimizer reset (stage:priming): no state before update 2'))).toBe(true);

    // The first GRPO update is what a new engine on the SFT checkpoint makes with a new AdamW.
    const fresh = writeRunConfig(ground.dir, 'reset-fresh', checkpointDir(unbroken.runDir, 2), '', {
      file: 'reset-fresh.yaml',
      train: '{ autocast: float32 }',
    });
    await play('reset-fresh', fresh, [0], (u) => ({ ...jobOf('reset-fresh', 2), update: u }));
    const first = maxDiff(weightsOf(unbroken.runDir, 3), weightsOf(fresh.runDir, 1));
    expect(first).toBeLessThanOrEqual(1e-6);
    // With reset never the same update carries SFT's Adam moments and ends elsewhere.
    const never = setup('reset-never', 'never');
    expect(resets(await play('reset-never', never, [0, 1, 2]))).toEqual([]);
    const kept = maxDiff(weightsOf(unbroken.runDir, 3), weightsOf(never.runDir, 3));
    expect(kept).toBeGreaterThan(1e-4);

    // Stopped after the first GRPO update and resumed from its checkpoint: update 3 goes on with
    // the optimizer the checkpoint holds (no second reset in priming), update 4 starts exploration anew.
    const resumed = setup('reset-resumed');
    expect(resets(await play('reset-resumed', resumed, [0, 1, 2]))).toEqual([2]);
    const after = await play('reset-resumed', resumed, [3, 4]);
    expect(after.some((l) => l.includes(`engine loaded checkpoint ${checkpointDir(resumed.runDir, 3)}`))).toBe(true);
    expect(resets(after)).toEqual([4]);
    const end = maxDiff(weightsOf(unbroken.runDir, 5), weightsOf(resumed.runDir, 5));
    expect(end).toBeLessThanOrEqual(1e-6);
    console.log(
      `[figure] grpo.optimizer.reset stage: first GRPO update vs a new engine's ${first.toExponential(2)}; vs reset never ${kept.toExponential(2)}; ` +
        `resumed in a stage vs unbroken after 5 updates ${end.toExponential(2)} (max |weight difference|)`,
    );
  }, 900_000);
});

describe('a checkpoint job (a stage that ends on a step without an update)', () => {
  it('checkpoints and publishes the weights as they are as the next version, with no optimizer step', async () => {
    const run = 'ckpt-job';
    const { config, runDir } = writeRunConfig(ground.dir, run, model, '', { file: `${run}.yaml`, train: '{ autocast: float32 }' });
    const worker = await startTrainWorker({
      connection: ground.conn,
      runId: run,
      workerId: 'trainer',
      settings,
      config,
      runDir,
      log: () => undefined,
    });
    const queue = new TrainQueue(ground.conn, run, settings);
    const registry = new PolicyRegistry(ground.conn, run);
    try {
      const grpo = (update: number): TrainJob => ({ run_id: run, stage: 'priming', update, kind: 'grpo', samples, checkpoint: false });
      await queue.submit(grpo(0));
      expect((await queue.waitResult(0, 300_000)).metrics.step).toBe(1);
      await queue.submit({ run_id: run, stage: 'priming', update: 1, kind: 'checkpoint', samples: [], checkpoint: true });
      const kept = await queue.waitResult(1, 300_000);
      expect(kept).toMatchObject({ update: 1, version: 2, checkpoint_dir: checkpointDir(runDir, 2) });
      expect(kept.metrics.step).toBeUndefined();
      expect(JSON.parse(readFileSync(join(kept.checkpoint_dir!, TRAINER_STATE_FILE), 'utf8')).updates).toBe(2);
      expect(await registry.current()).toEqual({ version: 2, dir: kept.policy_dir });
      expect(maxDiff(weightsOf(runDir, 1), weightsOf(runDir, 2))).toBe(0);
      // The next update is the optimizer's second step: the checkpoint job took none.
      await queue.submit(grpo(2));
      expect((await queue.waitResult(2, 300_000)).metrics.step).toBe(2);
      expect(maxDiff(weightsOf(runDir, 2), weightsOf(runDir, 3))).toBeGreaterThan(0);
    } finally {
      await queue.close();
      await worker.close();
    }
  }, 600_000);
});
