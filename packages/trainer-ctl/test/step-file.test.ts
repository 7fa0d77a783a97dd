/**
 * Bulk data beside the queue: token batches written by the control plane as safetensors files
 * (atomic, SHA-256 in the reference) and read by the real Python engine with numpy.memmap.
 * Checked against values computed here from the rows' formulas, never against the reader's
 * own output: a small hand-made batch, a torn file that both sides refuse, long trajectories
 * in the group store, and a step of 2,048 samples x 16,384 tokens sent through the train queue
 * to the engine and back (as JSON in a job, at the ~22 bytes per token issue 16 measured, about
 * 0.7 GB: over Redis's 512 MB limit for one value).
 */
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TrainEngine } from '../src/engine/driver';
import type { BatchStats } from '../src/engine/protocol';
import {
  connectRedis,
  GroupStore,
  keys,
  parseQueueSettings,
  readTokenBatch,
  StepFileError,
  pruneStepFiles,
  stepFilePath,
  TokenBatchWriter,
  TrainQueue,
  trainJobId,
  writeTokenBatch,
  type FileRef,
  type TrainJob,
  type TrainResult,
  type Trajectory,
} from '../src/queue/index';
import { startRedis, type TestRedis } from '../../../testkit/redis';

/** What the engine is told about a file: where it is and how to recognise it. */
const arg = (r: FileRef) => ({ path: r.path, bytes: r.bytes, sha256: r.sha256 });

let redis: TestRedis;
let conn: Redis;
let engine: TrainEngine;
let dir: string;

beforeAll(async () => {
  redis = await startRedis();
  conn = connectRedis(redis.url);
  engine = new TrainEngine();
  dir = mkdtempSync(join(tmpdir(), 'step-file-'));
});
afterAll(async () => {
  await engine?.shutdown();
  conn?.disconnect();
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('token-batch files', () => {
  it('are read by the engine with the sums of the rows written', async () => {
    const rows = [
      { ids: [5, 6, 7], mask: [0, 1, 1], logprobs: [0, -0.5, -0.25], advantage: 1.5 },
      { ids: [1, 2, 3, 4, 9], mask: [0, 0, 1, 0, 1], logprobs: [0, 0, -2, 0, -0.125], advantage: -0.75 },
    ];
    const ref = writeTokenBatch(join(dir, 'small.safetensors'), { count: rows.length, row: (i) => rows[i] });
    expect(ref).toMatchObject({ rows: 2, tokens: 8, logprobs: true, advantages: true, bytes: statSync(ref.path).size });
    const stats = await engine.request('batch_stats', { batch: arg(ref) });
    // By hand: ids 18 + 19, mask 2 + 2, logprobs under the mask -0.75 + -2.125, advantages 0.75.
    expect(stats).toEqual({
      sha256: ref.sha256,
      bytes: ref.bytes,
      rows: 2,
      tokens: 8,
      ids_sum: 37,
      masked_tokens: 4,
      max_row_tokens: 5,
      masked_logprob_sum: -2.875,
      advantage_sum: 0.75,
    });
    const back = readTokenBatch(ref);
    expect(back.offsets).toEqual([0, 3, 8]);
    expect(Array.from(back.ids)).toEqual([5, 6, 7, 1, 2, 3, 4, 9]);
    expect(Array.from(back.advantages!)).toEqual([1.5, -0.75]);
  });

  it('refuse ragged rows, non-binary masks and half-given columns at write time', () => {
    const w = (rows: object[]) => () => writeTokenBatch(join(dir, 'bad.safetensors'), { count: rows.length, row: (i) => rows[i] as never });
    expect(w([{ ids: [1, 2], mask: [0] }])).toThrow(/row 0: mask has 1 entries for 2 ids/);
    expect(w([{ ids: [1, 2], mask: [0, 2] }])).toThrow(/row 0: mask value 2 at 1/);
    expect(
      w([
        { ids: [1, 2], mask: [0, 1], advantage: 1 },
        { ids: [3, 4], mask: [0, 1] },
      ]),
    ).toThrow(/1 of 2 rows carry advantage; give all or none/);
    expect(existsSync(join(dir, 'bad.safetensors'))).toBe(false);
  });

  it('a torn or replaced file is never read: both readers refuse it by its checksum', async () => {
    const ref = writeTokenBatch(join(dir, 'whole.safetensors'), { count: 1, row: () => ({ ids: [1, 2, 3, 4], mask: [0, 1, 1, 1] }) });
    const torn = join(dir, 'torn.safetensors');
    copyFileSync(ref.path, torn);
    truncateSync(torn, ref.bytes - 3);
    await expect(engine.request('batch_stats', { batch: { ...arg(ref), path: torn } })).rejects.toThrow(/torn or replaced file/);
    expect(() => readTokenBatch({ ...ref, path: torn })).toThrow(StepFileError);
    // Same size, other bytes (a file replaced under the reference).
    const other = writeTokenBatch(join(dir, 'other.safetensors'), { count: 1, row: () => ({ ids: [1, 2, 3, 5], mask: [0, 1, 1, 1] }) });
    expect(other.bytes).toBe(ref.bytes);
    await expect(engine.request('batch_stats', { batch: { ...arg(ref), path: other.path } })).rejects.toThrow(/sha256/);
    expect(() => readTokenBatch({ ...ref, path: other.path })).toThrow(/sha256/);
    // No temporary file is left beside the written ones.
    expect(readdirSync(dir).filter((n) => n.includes('.tmp-'))).toEqual([]);
  });
});

describe('a step file staged group by group', () => {
  const RUN = 'staged';
  const settings = parseQueueSettings({});
  const group = (g: number): TrainJob['samples'] =>
    [0, 1].map((i) => ({ ids: [g, 10 + i, 20 + g], mask: [0, 1, 1], old_logprobs: [0, -1, -0.5 * (i + 1)], advantage: i === 0 ? g : -g }));

  it('is invisible until submit, then holds the staged blocks; other samples are written whole instead', async () => {
    const data = join(dir, 'staged');
    const queue = new TrainQueue(conn, RUN, settings, data);
    const groups = [group(1), group(2), group(3)];
    for (const g of groups) queue.stage(0, g, 3);
    expect(existsSync(stepFilePath(data, 0))).toBe(false);
    await queue.submit({ run_id: RUN, stage: 'priming', update: 0, kind: 'grpo', samples: groups.flat(), checkpoint: false });
    const job = JSON.parse((await conn.hget(`${settings.prefix}:${keys.trainQueue(RUN)}:${trainJobId(RUN, 0)}`, 'data'))!) as TrainJob;
    expect(job.batch).toMatchObject({ path: stepFilePath(data, 0), rows: 6, tokens: 18 });
    // By hand: ids (2g + 30) + (2g + 31) per group, two masked tokens per row, logprobs -1.5 - 2 per group, advantages g - g.
    const stats = await engine.request('batch_stats', { batch: arg(job.batch!) });
    expect(stats).toMatchObject({
      rows: 6,
      tokens: 18,
      ids_sum: 4 * (1 + 2 + 3) + 3 * 61,
      masked_tokens: 12,
      masked_logprob_sum: -10.5,
      advantage_sum: 0,
    });
    expect(readTokenBatch(job.batch!).offsets).toEqual([0, 3, 6, 9, 12, 15, 18]);

    // Staged rows that are not the job's samples are dropped; the file holds the job's samples.
    queue.stage(1, group(7), 1);
    await queue.submit({ run_id: RUN, stage: 'priming', update: 1, kind: 'grpo', samples: group(8), checkpoint: false });
    const other = JSON.parse((await conn.hget(`${settings.prefix}:${keys.trainQueue(RUN)}:${trainJobId(RUN, 1)}`, 'data'))!) as TrainJob;
    expect(Array.from(readTokenBatch(other.batch!).ids)).toEqual([8, 10, 28, 8, 11, 28]);
    expect(readdirSync(join(data, 'steps')).sort()).toEqual(['update-000000.safetensors', 'update-000001.safetensors']);

    // A controller killed while staging leaves a temporary file; a checkpoint past it removes it with the rest.
    const killed = new TokenBatchWriter(stepFilePath(data, 2), { reserveBlocks: 1 });
    killed.append({ count: 1, row: () => group(9)[0] });
    expect(readdirSync(join(data, 'steps'))).toHaveLength(3);
    pruneStepFiles(data, 3);
    expect(readdirSync(join(data, 'steps'))).toEqual([]);
    await queue.close();
  });
});

describe('group store with a data directory', () => {
  const RUN = 'files-run';
  const trajectory = (groupId: string, sampleIndex: number, n: number): Trajectory => ({
    group_id: groupId,
    temperature: 1,
    case_id: 'case-1',
    sample_index: sampleIndex,
    policy_version: 3,
    ids: Array.from({ length: n }, (_, t) => (t * 13 + sampleIndex) % 1000),
    mask: Array.from({ length: n }, (_, t) => (t > 10 && t % 2 === 0 ? 1 : 0)),
    logprobs: Array.from({ length: n }, (_, t) => (t > 10 && t % 2 === 0 ? -(t % 7) / 8 - 0.1 : 0)),
    episode: { case_id: 'case-1', turns: [], stop_reason: 'answer' } as unknown as Trajectory['episode'],
    worker_id: 'w1',
    timing: { generate_ms: 1, tools_ms: 2, wall_ms: 3 },
  });

  it('keeps short trajectories inline and long ones in files, read back whole and deleted with the group', async () => {
    const dataDir = join(dir, 'data');
    const store = new GroupStore(conn, RUN, 1000, { dataDir, inlineMaxTokens: 100 });
    const short = trajectory('g-1', 0, 50);
    const long = trajectory('g-1', 1, 3000);
    await store.put(short);
    await store.put(long);
    await store.put({ ...long, worker_id: 'w2' }); // a retried sample replaces its slot
    const fields = await conn.hgetall(keys.group(RUN, 'g-1'));
    expect(JSON.parse(fields['0'])).toEqual(short);
    expect(fields['1'].length).toBeLessThan(400);
    expect(JSON.parse(fields['1']).file.tokens).toBe(3000);
    const [a, b] = await store.read('g-1');
    expect(a).toEqual(short);
    // Log-probabilities travel as float32, the precision the engine computes with.
    expect(b).toEqual({ ...long, worker_id: 'w2', logprobs: long.logprobs.map(Math.fround) });
    const groupDir = join(dataDir, 'groups', 'g-1');
    expect(readdirSync(groupDir)).toHaveLength(2);
    await store.delete(['g-1']);
    expect(existsSync(groupDir)).toBe(false);
    expect(await conn.exists(keys.group(RUN, 'g-1'))).toBe(0);
    await store.close();
  });
});

/** Row i of the synthetic big step: ids, mask and log-probabilities follow closed formulas. */
const B = 2048;
const T = 16_384;
const idOf = (i: number, t: number) => (i * 7919 + t * 31) % 32_000;
const maskOf = (t: number) => (t >= 1024 && t % 3 !== 0 ? 1 : 0);
const logprobOf = (t: number) => (maskOf(t) ? -((t % 100) + 1) / 64 : 0);
const advantageOf = (i: number) => ((i % 7) - 3) / 4;

describe('a step of 2,048 samples x 16,384 tokens', () => {
  it('goes from the controller through the train queue to the engine and back, as a reference in Redis', async () => {
    const RUN = 'big-step';
    const settings = parseQueueSettings({});
    const queue = new TrainQueue(conn, RUN, settings, join(dir, 'big'));
    let last = -1;
    let cached: { ids: Int32Array; mask: Uint8Array; logprobs: Float32Array; advantage: number } | undefined;
    const row = (i: number) => {
      if (i !== last || !cached) {
        const ids = new Int32Array(T);
        const mask = new Uint8Array(T);
        const logprobs = new Float32Array(T);
        for (let t = 0; t < T; t++) {
          ids[t] = idOf(i, t);
          mask[t] = maskOf(t);
          logprobs[t] = logprobOf(t);
        }
        cached = { ids, mask, logprobs, advantage: advantageOf(i) };
        last = i;
      }
      return cached;
    };
    // Lazy samples: a real job holds arrays, this one builds each row when the writer asks.
    const samples = new Proxy([] as TrainJob['samples'], {
      get: (target, p) => {
        if (p === 'length') return B;
        if (typeof p === 'string' && /^\d+$/.test(p)) {
          const r = row(Number(p));
          return { ids: r.ids, mask: r.mask, old_logprobs: r.logprobs, advantage: r.advantage };
        }
        return Reflect.get(target, p);
      },
    });
    await queue.submit({ run_id: RUN, stage: 'priming', update: 0, kind: 'grpo', samples, checkpoint: false });

    // Redis holds the reference, not the tokens.
    const jobKey = `${settings.prefix}:${keys.trainQueue(RUN)}:${trainJobId(RUN, 0)}`;
    const data = await conn.hget(jobKey, 'data');
    expect(data!.length).toBeLessThan(1000);
    const job = JSON.parse(data!) as TrainJob;
    expect(job.samples).toEqual([]);
    expect(job.batch).toMatchObject({ rows: B, tokens: B * T, logprobs: true, advantages: true });
    expect(statSync(job.batch!.path).size).toBe(job.batch!.bytes);

    // The train side: a worker on the queue hands the job's reference to the engine.
    const workerConn = conn.duplicate();
    const worker = new Worker<TrainJob, TrainResult>(
      keys.trainQueue(RUN),
      async (j) => {
        const stats = await engine.request('batch_stats', { batch: arg(j.data.batch!) }, 600_000);
        return { update: j.data.update, version: j.data.update + 1, policy_dir: '', metrics: stats as unknown as Record<string, number> };
      },
      { connection: workerConn, prefix: settings.prefix, concurrency: 1 },
    );
    const result = await queue.waitResult(0, 600_000);
    await worker.close();
    workerConn.disconnect();

    // Expected values from the formulas, summed here.
    let idsSum = 0;
    let masked = 0;
    let lpSum = 0;
    for (let t = 0; t < T; t++) {
      masked += maskOf(t);
      lpSum += logprobOf(t);
    }
    for (let i = 0; i < B; i++) for (let t = 0; t < T; t++) idsSum += idOf(i, t);
    let advSum = 0;
    for (let i = 0; i < B; i++) advSum += advantageOf(i);
    const stats = result.metrics as unknown as BatchStats;
    expect(stats).toMatchObject({
      sha256: job.batch!.sha256,
      rows: B,
      tokens: B * T,
      max_row_tokens: T,
      ids_sum: idsSum,
      masked_tokens: B * masked,
    });
    expect(stats.masked_logprob_sum).toBeCloseTo(B * lpSum, 3);
    expect(stats.advantage_sum).toBeCloseTo(advSum, 9);
    await queue.close();
  }, 900_000);
});
