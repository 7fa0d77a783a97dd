/**
 * ONNX export of the tiny model, run with onnxruntime-node (the onnx backend's runtime) and
 * compared with the engine's PyTorch logits: without past, with a KV cache, and left-padded.
 */
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TinyModelConfigSchema, TrainEngine } from '../src/engine';

const CONFIG = TinyModelConfigSchema.parse({
  vocab_size: 50,
  hidden_size: 48,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  head_dim: 12,
  intermediate_size: 64,
});
const IDS = [3, 17, 4, 9, 22, 31, 8, 40, 2];
const TOL = 1e-4;

type Feeds = Record<string, ort.Tensor>;
const i64 = (rows: number[][]) => new ort.Tensor('int64', BigInt64Array.from(rows.flat().map(BigInt)), [rows.length, rows[0].length]);

function emptyPast(batch: number): Feeds {
  const feeds: Feeds = {};
  for (let i = 0; i < CONFIG.num_hidden_layers; i++) {
    for (const kind of ['key', 'value']) {
      feeds[`past_key_values.${i}.${kind}`] = new ort.Tensor('float32', new Float32Array(0), [
        batch,
        CONFIG.num_key_value_heads,
        0,
        CONFIG.head_dim,
      ]);
    }
  }
  return feeds;
}

function presentsAsPast(out: ort.InferenceSession.OnnxValueMapType): Feeds {
  const feeds: Feeds = {};
  for (let i = 0; i < CONFIG.num_hidden_layers; i++) {
    for (const kind of ['key', 'value']) feeds[`past_key_values.${i}.${kind}`] = out[`present.${i}.${kind}`] as ort.Tensor;
  }
  return feeds;
}

/** Logits of batch row b, positions [from, to), as rows of V numbers. */
function rows(t: ort.Tensor, b: number, from: number, to: number): number[][] {
  const [, T, V] = t.dims;
  const data = t.data as Float32Array;
  const out: number[][] = [];
  for (let p = from; p < to; p++) out.push(Array.from(data.subarray((b * T + p) * V, (b * T + p + 1) * V)));
  return out;
}

function maxDiff(a: number[][], b: number[][]): number {
  expect(a.length).toBe(b.length);
  return Math.max(...a.map((r, i) => Math.max(...r.map((v, j) => Math.abs(v - b[i][j])))));
}

describe('ONNX export of the tiny model', () => {
  const dir = mkdtempSync(join(tmpdir(), 'engine-onnx-'));
  const engine = new TrainEngine();
  let session: ort.InferenceSession;
  let torchLogits: number[][];

  beforeAll(async () => {
    const modelDir = join(dir, 'model');
    await engine.request('create_tiny', { out_dir: modelDir, config: CONFIG, seed: 3 });
    writeFileSync(join(modelDir, 'tokenizer.json'), '{"model": {"vocab": {}}}');
    await engine.request('load', { model_dir: modelDir, optimizer: { lr: 1e-2 } });
    // Train a little so the export is not of the initial weights only.
    await engine.request('sft_step', { input_ids: [IDS], mask: [IDS.map((_, t) => (t > 2 ? 1 : 0))] });
    const exported = await engine.request('export', { dir: join(dir, 'export'), format: 'onnx' });
    expect(exported.onnx).toBe(join(dir, 'export', 'onnx', 'model.onnx'));
    session = await ort.InferenceSession.create(exported.onnx!);
    torchLogits = (await engine.request('logits', { input_ids: [IDS] })).logits[0];
  });
  afterAll(async () => {
    await engine.shutdown();
  });

  it('writes a complete model dir with the optimum input/output names', () => {
    for (const f of ['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json'])
      expect(existsSync(join(dir, 'export', f))).toBe(true);
    const past = Object.keys(emptyPast(1));
    expect(session.inputNames).toEqual(['input_ids', 'attention_mask', 'position_ids', ...past]);
    expect(session.outputNames).toEqual(['logits', ...past.map((n) => n.replace('past_key_values', 'present'))]);
  });

  it('matches PyTorch logits with an empty past', async () => {
    const n = IDS.length;
    const out = await session.run({
      input_ids: i64([IDS]),
      attention_mask: i64([IDS.map(() => 1)]),
      position_ids: i64([IDS.map((_, t) => t)]),
      ...emptyPast(1),
    });
    expect(out.logits.dims).toEqual([1, n, CONFIG.vocab_size]);
    expect(out['present.1.value'].dims).toEqual([1, CONFIG.num_key_value_heads, n, CONFIG.head_dim]);
    expect(maxDiff(rows(out.logits as ort.Tensor, 0, 0, n), torchLogits)).toBeLessThan(TOL);
  });

  it('matches PyTorch logits when continuing from a KV cache', async () => {
    const k = 4;
    const first = await session.run({
      input_ids: i64([IDS.slice(0, k)]),
      attention_mask: i64([IDS.slice(0, k).map(() => 1)]),
      position_ids: i64([[0, 1, 2, 3]]),
      ...emptyPast(1),
    });
    const rest = IDS.slice(k);
    const second = await session.run({
      input_ids: i64([rest]),
      attention_mask: i64([IDS.map(() => 1)]),
      position_ids: i64([rest.map((_, t) => k + t)]),
      ...presentsAsPast(first),
    });
    expect(second['present.0.key'].dims).toEqual([1, CONFIG.num_key_value_heads, IDS.length, CONFIG.head_dim]);
    expect(maxDiff(rows(second.logits as ort.Tensor, 0, 0, rest.length), torchLogits.slice(k))).toBeLessThan(TOL);
  });

  it('ignores left padding masked out by attention_mask in a batch', async () => {
    const pad = 3;
    const other = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16];
    const padded = [...Array(pad).fill(0), ...IDS];
    const out = await session.run({
      input_ids: i64([padded, other]),
      attention_mask: i64([padded.map((_, t) => (t < pad ? 0 : 1)), other.map(() => 1)]),
      position_ids: i64([padded.map((_, t) => Math.max(t - pad, 0)), other.map((_, t) => t)]),
      ...emptyPast(2),
    });
    expect(maxDiff(rows(out.logits as ort.Tensor, 0, pad, padded.length), torchLogits)).toBeLessThan(TOL);
  });
});
