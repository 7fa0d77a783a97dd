/**
 * A train worker that resumed from a checkpoint needs nothing from it afterwards: with the
 * checkpoint it loaded deleted (what checkpoints.keep_last does a few updates later), it goes on
 * making updates, exporting policies with the model's tokenizer files, writing whole checkpoints,
 * and restarting a killed engine. For a full model, a LoRA adapter, and DeepSpeed ZeRO-2 on 2 CPU
 * ranks. Every update's result names the checkpoint its engine came from (retention keeps it).
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDataset } from '@thinkfl/env';
import { loadRunConfig } from '../src/config/index';
import { connectRedis, parseQueueSettings, TrainQueue, type TrainJob, type TrainSample } from '../src/queue/index';
import { checkpointDir, listCheckpoints, startTrainWorker } from '../src/workers/index';
import { ensureNezhaDataset, NEZHA_DATASET, REPO_ROOT } from '../../../testkit/nezha';
import { startRedis, type TestRedis } from '../../../testkit/redis';
import { createTinyModel, expertSamples, scratch } from './workers-fixtures';

let redis: TestRedis;
let conn: Redis;
let dir: string;
let model: string;
let samples: TrainSample[];
const settings = parseQueueSettings({ prefix: 'thinkfl', pollMs: 50 });

beforeAll(async () => {
  redis = await startRedis();
  conn = connectRedis(redis.url);
  const dataset = await loadDataset(await ensureNezhaDataset());
  dir = scratch('retention');
  model = await createTinyModel(join(dir, 'model'), 1);
  samples = await expertSamples(dataset, model, [1, -1]);
}, 600_000);
afterAll(async () => {
  conn?.disconnect();
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const VARIANTS = {
  full: { model: '', train: '{ autocast: auto }' },
  lora: { model: ', lora: { r: 4, alpha: 8, target_modules: [q_proj, v_proj] }', train: '{ autocast: auto }' },
  'deepspeed zero-2': { model: '', train: `{ ranks: 2, deepspeed_config: ${join(REPO_ROOT, 'configs', 'deepspeed', 'zero2.json')} }` },
};

describe.each(Object.entries(VARIANTS))('train worker resumed from a checkpoint that retention then deletes (%s)', (name, v) => {
  it('goes on updating, exporting and checkpointing, and restarts a killed engine', async () => {
    const run = `retention-${name.replace(/\W+/g, '-')}`;
    const file = join(dir, `${run}.yaml`);
    writeFileSync(
      file,
      `run: { name: ${run}, output_dir: ${join(dir, 'runs')}, seed: 0 }
model: { dir: ${model}, dtype: float32, max_context_tokens: 4096${v.model} }
dataset: { path: ${NEZHA_DATASET} }
episode: { protocol: rot, d_max: 3, tool_settings: { span_aliases: true } }
generation: { backend: { kind: onnx, threads: 1 } }
grpo: { group_size: 2, loss: { kl_coef: 0.001 }, optimizer: { lr: 1.0e-3 } }
workers: { train: ${v.train} }
`,
    );
    const { config, runDir } = loadRunConfig(file);
    const logs: string[] = [];
    const start = () => startTrainWorker({ connection: conn, runId: run, workerId: 'trainer', settings, config, runDir, log: (l) => logs.push(l) });
    const job = (update: number): TrainJob => ({ runId: run, stage: 'priming', update, kind: 'grpo', samples, checkpoint: true });
    const queue = new TrainQueue(conn, run, settings);
    try {
      let worker = await start();
      for (const u of [0, 1]) {
        await queue.submit(job(u));
        expect((await queue.waitResult(u, 300_000)).engineCheckpoint).toBeUndefined();
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
      expect(third).toMatchObject({ update: 2, version: 3, engineCheckpoint: loaded });
      // The export carries the model's tokenizer files; the checkpoint is whole and holds them too.
      const tokenizer = readFileSync(join(model, 'tokenizer.json'), 'utf8');
      const exported = name === 'lora' ? join(third.policyDir, 'merged') : third.policyDir;
      expect(readFileSync(join(exported, 'tokenizer.json'), 'utf8')).toBe(tokenizer);
      expect(readFileSync(join(third.checkpointDir!, 'tokenizer.json'), 'utf8')).toBe(tokenizer);
      expect(existsSync(join(third.checkpointDir!, 'trainer-state.json'))).toBe(true);
      expect(listCheckpoints(runDir).map((c) => c.updates)).toEqual([3]);

      // An engine killed now restarts from checkpoint 3 and makes update 3; then checkpoint 3 goes too.
      process.kill(worker.enginePid!, 'SIGKILL');
      await queue.submit(job(3));
      const fourth = await queue.waitResult(3, 300_000);
      expect(fourth).toMatchObject({ update: 3, version: 4, engineCheckpoint: checkpointDir(runDir, 3) });
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
