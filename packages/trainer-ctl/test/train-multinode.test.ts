/**
 * A multi-node train engine (issue 30): two torchrun agents on loopback, one per "node", each
 * with one rank, meet at node 0's rendezvous (gloo on CPU) under DeepSpeed ZeRO-2, and node 0
 * drives the world through global rank 0. Its GRPO updates end with the weights of one node with
 * 2 ranks (within 1e-6). Killing the other node (its agent and its rank) ends the next request
 * with one error naming the lost peer, and the engine is gone. In a real run the same fault stops
 * `trainer-ctl train` with that error and --resume; once node 1's `trainer-ctl worker train
 * --node-rank 1` runs again, `--resume` finishes the run.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TrainEngine, type EngineOptions } from '../src/engine';
import { readSafetensors, tensorValues } from '../../../testkit/safetensors';
import { REPO_ROOT } from '../../../testkit/nezha';
import { TINY_CONFIG } from './engine-fixtures';
import { descendants, expectedKeys, spawnTrain, stepKeys, tinyRunYaml, until } from './train-fixtures';
import { scratch, spawnWorker, type WorkerProcess } from './workers-fixtures';
import { freePort } from '../../../testkit/ports';

const IDS = [
  [1, 5, 6, 7, 8, 9, 10, 2],
  [1, 5, 11, 12, 13, 2],
  [1, 7, 6, 5, 14, 15, 16, 17, 2],
  [1, 8, 9, 10, 11, 2],
];
const MASK = IDS.map((row) => row.map((_, t) => (t >= 2 ? 1 : 0)));
const DEEPSPEED = { zero_optimization: { stage: 2 } };

const dir = scratch('multinode');
const base = join(dir, 'base');

/** Two GRPO updates on the engine whose rank 0 `driver` is, then its weights. */
async function train(driver: TrainEngine, out: string): Promise<Map<string, Float64Array>> {
  await driver.request('load', { model_dir: base, seed: 0, dtype: 'float32', optimizer: { lr: 1e-2 }, deepspeed: DEEPSPEED });
  for (const advantages of [
    [1, -1, 0.5, -0.5],
    [-0.3, 0.8, -1, 0.4],
  ]) {
    await driver.request('grpo_step', { input_ids: IDS, mask: MASK, advantages, temperature: 0.8, micro_batch_size: 1 });
  }
  await driver.request('save', { dir: out });
  return new Map([...readSafetensors(join(out, 'model.safetensors'))].map(([k, t]) => [k, tensorValues(t)]));
}

beforeAll(async () => {
  const engine = new TrainEngine();
  try {
    await engine.request('create_tiny', { out_dir: base, config: TINY_CONFIG, seed: 7 });
  } finally {
    await engine.shutdown();
  }
}, 300_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('an engine of 2 nodes x 1 rank', () => {
  it('updates as 1 node x 2 ranks does; a lost node ends the next request with one clear error', async () => {
    const one = new TrainEngine({ ranks: 2, distributed: true });
    let reference: Map<string, Float64Array>;
    try {
      reference = await train(one, join(dir, 'one-node'));
    } finally {
      await one.shutdown();
    }

    const rendezvous = `127.0.0.1:${await freePort()}`;
    const node = (rank: number): EngineOptions => ({ ranks: 1, distributed: true, nodes: { count: 2, rank, rendezvous, timeoutS: 120 } });
    let logs = '';
    const node0 = new TrainEngine({ ...node(0), onStderr: (t) => (logs += t) });
    const node1 = new TrainEngine(node(1));
    try {
      const split = await train(node0, join(dir, 'two-nodes'));
      let worst = 0;
      expect([...split.keys()].sort()).toEqual([...reference.keys()].sort());
      for (const [k, w] of reference) w.forEach((x, i) => (worst = Math.max(worst, Math.abs(x - split.get(k)![i]))));
      expect(worst).toBeLessThanOrEqual(1e-6);
      expect(logs).toMatch(/rank 0 of 2: micro-batches \[\d, \d\] of 4/);

      // Node 1 is lost: its agent and its rank, as when the machine goes.
      for (const pid of [node1.pid!, ...descendants(node1.pid!)]) process.kill(pid, 'SIGKILL');
      await node1.exited;
      const failed = node0.request('grpo_step', { input_ids: IDS, mask: MASK, advantages: [1, -1, 1, -1], temperature: 0.8 });
      await expect(failed).rejects.toThrow(
        /^grpo_step: lost a peer of the 2-process engine \(a rank, or its node, is gone or unreachable\)/,
      );
      await expect(failed).rejects.toMatchObject({ kind: 'exited' });
      expect(node0.dead).toBe(true);
      await node0.exited;
      console.log(
        `[figure] 2 nodes x 1 rank vs 1 node x 2 ranks, ZeRO-2 on CPU (gloo): max |weight difference| ${worst.toExponential(2)} after 2 GRPO updates`,
      );
    } finally {
      await node0.dispose();
      await node1.dispose();
    }
  }, 600_000);
});

describe('a run on 2 train nodes', () => {
  let node1: WorkerProcess | undefined;
  afterAll(async () => {
    if (node1 && node1.child.exitCode === null) {
      node1.child.kill('SIGTERM');
      await node1.exited;
    }
  });

  it('stops with the lost node named and --resume once node 1 runs again; --resume finishes the run', async () => {
    const rendezvous = `127.0.0.1:${await freePort()}`;
    const deepspeed = join(REPO_ROOT, 'configs', 'deepspeed', 'zero2.json');
    const file = join(dir, 'run.yaml');
    writeFileSync(
      file,
      tinyRunYaml(dir, 'two-nodes', {
        train: `{ deepspeed_config: ${deepspeed}, nodes: 2, rendezvous: '${rendezvous}', rendezvous_timeout_s: 180 }`,
      }),
    );
    const runDir = join(dir, 'runs', 'two-nodes');
    const startNode1 = () => spawnWorker(['train', '--config', file, '--node-rank', '1']);
    node1 = startNode1();
    const run = spawnTrain(file, runDir);
    // Node 1 is lost once the run is in GRPO (its first step has been recorded).
    await until('the first GRPO step', () => stepKeys(runDir).some((k) => k.startsWith('priming:')), 900_000, 500);
    // The worker, its torchrun agent and the agent's rank (which runs in a session of its own).
    for (const pid of [node1.child.pid!, ...descendants(node1.child.pid!)]) process.kill(pid, 'SIGKILL');
    const stopped = await run.exited;
    expect(stopped.code).toBe(1);
    expect(stopped.output).toMatch(/lost a peer of the 2-process engine/);
    expect(stopped.output).toMatch(/train engine of 2 nodes failed during update \d+/);
    expect(stopped.output).toMatch(/--resume/);

    node1 = startNode1();
    const resumed = await spawnTrain(file, runDir, ['--resume']).exited;
    expect(resumed.code, resumed.output.slice(-3000)).toBe(0);
    expect(stepKeys(runDir)).toEqual(expectedKeys(runDir));
    expect(readFileSync(join(runDir, 'metrics.jsonl'), 'utf8').trim().split('\n').length).toBe(expectedKeys(runDir).length);
    expect(node1.lines.some((l) => /node 1 of 2: 1 rank\(s\) started/.test(l))).toBe(true);
  }, 1_800_000);
});
