/**
 * `trainer-ctl worker` as its own process: the train worker publishes the policy it starts
 * from, registers its heartbeat and exits 0 on SIGTERM, leaving the registry; bad invocations
 * fail with a clear message.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadedRunConfig } from '../src/config/index';
import { listWorkers, PolicyRegistry } from '../src/queue/index';
import { closeGround, openGround, spawnWorker, writeRunConfig, type WorkerGround } from './workers-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';

let ground: WorkerGround;
let loaded: LoadedRunConfig;

beforeAll(async () => {
  ground = await openGround('command');
  loaded = writeRunConfig(ground.dir, 'command-test', await createTinyModel(join(ground.dir, 'model'), 4));
}, 300_000);
afterAll(() => closeGround(ground));

describe('trainer-ctl worker', () => {
  it('train: publishes version 0 from the model dir, beats, and exits 0 on SIGTERM', async () => {
    const w = spawnWorker(['train', '--config', loaded.file, '--redis', ground.redis.url, '--id', 'trainer-1']);
    await w.waitLine(/trainer-1 ready on redis:\/\//, 180_000);
    expect(w.lines.some((l) => /published policy v0 /.test(l))).toBe(true);
    const ref = await new PolicyRegistry(ground.conn, 'command-test').current();
    expect(ref).toEqual({ version: 0, dir: join(loaded.runDir, 'policies', 'v0') });
    expect(existsSync(join(ref!.dir, 'onnx', 'model.onnx'))).toBe(true);
    expect((await listWorkers(ground.conn, 'command-test')).map((b) => [b.id, b.kind])).toEqual([['trainer-1', 'train']]);
    w.child.kill('SIGTERM');
    expect(await w.exited).toEqual({ code: 0, signal: null });
    expect(await listWorkers(ground.conn, 'command-test')).toEqual([]);
  }, 240_000);

  it('refuses to start without a Redis URL', async () => {
    const w = spawnWorker(['rollout', '--config', loaded.file]);
    expect((await w.exited).code).toBe(2);
    expect(w.lines.join('\n')).toMatch(
      /trainer-ctl: worker: give --redis URL or THINKFL_REDIS_URL \(the run config has queue.redis_url: null\)/,
    );
  }, 60_000);

  it('names the config file it cannot read, and the YAML path of a bad setting', async () => {
    const missing = spawnWorker(['rollout', '--config', join(loaded.file, '..', 'missing.yaml'), '--redis', ground.redis.url]);
    expect((await missing.exited).code).toBe(2);
    expect(missing.lines.join('\n')).toMatch(/missing\.yaml.*cannot read the run config/s);
    const bad = join(loaded.file, '..', 'bad.yaml');
    writeFileSync(bad, readFileSync(loaded.file, 'utf8').replace('concurrency: 1', 'concurrency: 0'));
    const w = spawnWorker(['rollout', '--config', bad, '--redis', ground.redis.url]);
    expect((await w.exited).code).toBe(2);
    expect(w.lines.join('\n')).toMatch(/bad\.yaml.*workers\.rollout\.concurrency/s);
  }, 60_000);
});
