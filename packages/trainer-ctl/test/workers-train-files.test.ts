/**
 * The train worker on step files: with the run's data directory, the train queue writes a
 * job's samples to a token-batch file and Redis carries the reference; the real train worker's
 * engine (a real tiny model) trains from the memory-mapped file. The update equals the same
 * samples sent inline as JSON to a second engine loaded from the same model, and once an
 * update is checkpointed the step files it covers are deleted.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadedRunConfig } from '../src/config/index';
import { TrainEngine } from '../src/engine/driver';
import { keys, parseQueueSettings, stepFilePath, TrainQueue, trainJobId, type TrainJob, type TrainSample } from '../src/queue/index';
import { dataDir, engineOptimizer, engineStep } from '../src/workers/index';
import { closeGround, grpoJob, openTrainGround, startTrainer, type TrainGround } from './workers-fixtures';

const RUN = 'train-files';
let ground: TrainGround;
let loaded: LoadedRunConfig;
let model: string;
let samples: TrainSample[];
const settings = parseQueueSettings({ pollMs: 50 });

beforeAll(async () => {
  ground = await openTrainGround('train-files', RUN, 3, [1, -0.5]);
  ({ loaded, model, samples } = ground);
}, 600_000);
afterAll(() => closeGround(ground));

describe('train worker with step files', () => {
  it('trains from the file as from the same samples inline, and deletes step files once checkpointed', async () => {
    const job = (update: number, checkpoint: boolean): TrainJob => grpoJob(RUN, samples, update, checkpoint);
    const data = dataDir(loaded.runDir);
    const queue = new TrainQueue(ground.conn, RUN, settings, data);
    const worker = await startTrainer(ground.conn, RUN, settings, loaded);
    try {
      await queue.submit(job(0, false));
      const stored = JSON.parse(
        (await ground.conn.hget(`${settings.prefix}:${keys.trainQueue(RUN)}:${trainJobId(RUN, 0)}`, 'data'))!,
      ) as TrainJob;
      expect(stored.samples).toEqual([]);
      expect(stored.batch).toMatchObject({ path: stepFilePath(data, 0), rows: 2, tokens: samples[0].ids.length + samples[1].ids.length });
      const fromFile = await queue.waitResult(0, 300_000);

      // The same samples inline, to an engine loaded from the same model with the same settings.
      const inline = new TrainEngine();
      try {
        const c = loaded.config;
        await inline.request('load', {
          model_dir: model,
          device: c.workers.train.device,
          dtype: c.model.dtype,
          autocast: c.workers.train.autocast,
          autocast_cache: c.workers.train.autocast_cache,
          threads: c.workers.train.threads,
          seed: c.run.seed,
          optimizer: engineOptimizer(c),
        });
        // As the train worker does before its first GRPO update.
        if (c.grpo.loss.kl_coef > 0) await inline.request('set_reference', { tag: 'grpo_start' });
        const step = engineStep(job(0, false), c);
        expect(step.op).toBe('grpo_step');
        const out = await inline.request('grpo_step', step.args as never);
        expect(fromFile.metrics.loss).toBe(out.loss);
        expect(fromFile.metrics.grad_norm).toBe(out.grad_norm);
        expect(fromFile.metrics.tokens).toBe(out.tokens);
      } finally {
        await inline.shutdown();
      }
      expect(existsSync(stepFilePath(data, 0))).toBe(true);

      // Update 1 is checkpointed: its step file and update 0's are no longer needed.
      await queue.submit(job(1, true));
      const second = await queue.waitResult(1, 300_000);
      expect(second.checkpoint_dir).toBeDefined();
      expect(readdirSync(join(data, 'steps'))).toEqual([]);
    } finally {
      await worker.close();
      await queue.close();
    }
  }, 900_000);
});
