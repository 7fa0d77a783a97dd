/**
 * The policy export traces its ONNX graphs once per model layout and afterwards writes only new
 * weights into them (engine/thinkfl_engine/onnx_weights.py). A refreshed policy must compute what
 * a full export of the same weights computes: its graphs are run with onnxruntime-node beside the
 * graphs a fresh engine traces from the policy's own weights (identical logits), beside PyTorch's
 * logits and transformers' greedy tokens; for full fine-tuning, for LoRA (the merged export), with
 * the weights in the graph files or in one external file, and a new architecture traces anew.
 */
import { cpSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TinyModelConfigSchema, TrainEngine } from '../src/engine';
import { maxDiff, TINY_CONFIG } from './engine-fixtures';

const IDS = [1, 5, 6, 7, 8, 9, 10, 11, 3];
const BATCH = [IDS, [1, 12, 13, 14, 15, 16, 17, 18, 2]];
const MASK = BATCH.map((row) => row.map((_, t) => (t >= 3 ? 1 : 0)));
const TOL = 1e-4;
const GREEDY = 8;

const i64 = (rows: number[][]) => new ort.Tensor('int64', BigInt64Array.from(rows.flat().map(BigInt)), [rows.length, rows[0].length]);

/** The graphs of one export, opened with onnxruntime-node. */
class Graphs {
  private constructor(
    private model: ort.InferenceSession,
    private decode: ort.InferenceSession,
    private layers: number,
    private kvHeads: number,
    private headDim: number,
  ) {}

  static async open(onnxPath: string, cfg: { num_hidden_layers: number; num_key_value_heads: number; head_dim: number }): Promise<Graphs> {
    const decode = join(dirname(onnxPath), 'decode.onnx');
    return new Graphs(
      await ort.InferenceSession.create(onnxPath),
      await ort.InferenceSession.create(decode),
      cfg.num_hidden_layers,
      cfg.num_key_value_heads,
      cfg.head_dim,
    );
  }

  private empty(name: string): Record<string, ort.Tensor> {
    const out: Record<string, ort.Tensor> = {};
    for (let i = 0; i < this.layers; i++) {
      for (const kind of ['key', 'value'])
        out[`${name}.${i}.${kind}`] = new ort.Tensor('float32', new Float32Array(0), [1, this.kvHeads, 0, this.headDim]);
    }
    return out;
  }

  /** model.onnx's logits of every position of one sequence, without past. */
  async logits(ids: number[]): Promise<Float32Array> {
    const out = await this.model.run({
      input_ids: i64([ids]),
      attention_mask: i64([ids.map(() => 1)]),
      position_ids: i64([ids.map((_, t) => t)]),
      ...this.empty('past_key_values'),
    });
    return out.logits.data as Float32Array;
  }

  /** decode.onnx's logits of the last token, prefilling the sequence on a fully masked one-position cache. */
  async decodeLogits(ids: number[]): Promise<Float32Array> {
    // One masked position: a prefix is [groups, heads, positions, headDim], a suffix [groups, heads, rows, positions, headDim].
    const one = (name: string, dims: number[]): Record<string, ort.Tensor> => {
      const out: Record<string, ort.Tensor> = {};
      for (let i = 0; i < this.layers; i++) {
        for (const kind of ['key', 'value'])
          out[`${name}.${i}.${kind}`] = new ort.Tensor('float32', new Float32Array(this.kvHeads * this.headDim), dims);
      }
      return out;
    };
    const out = await this.decode.run({
      input_ids: i64([ids]),
      position_ids: i64([ids.map((_, t) => t)]),
      prefix_mask: new ort.Tensor('float32', Float32Array.of(-Infinity), [1, 1]),
      suffix_mask: new ort.Tensor('float32', Float32Array.of(-Infinity), [1, 1]),
      ...one('prefix', [1, this.kvHeads, 1, this.headDim]),
      ...one('suffix', [1, this.kvHeads, 1, 1, this.headDim]),
    });
    return out.logits.data as Float32Array;
  }

  /** Greedy continuation on model.onnx (recomputing the whole sequence each token). */
  async greedy(ids: number[], n: number, vocab: number): Promise<number[]> {
    const seq = [...ids];
    for (let k = 0; k < n; k++) {
      const last = (await this.logits(seq)).subarray((seq.length - 1) * vocab, seq.length * vocab);
      seq.push(last.indexOf(Math.max(...last)));
    }
    return seq.slice(ids.length);
  }

  async release(): Promise<void> {
    await this.model.release();
    await this.decode.release();
  }
}

/** The onnx export of the model in modelDir by an engine that has traced nothing yet. */
async function exportInNewEngine(modelDir: string, out: string) {
  const fresh = new TrainEngine();
  try {
    await fresh.request('load', { model_dir: modelDir });
    return await fresh.request('export', { dir: out, format: 'onnx' });
  } finally {
    await fresh.shutdown();
  }
}

describe('ONNX policy export: graphs traced once, new weights written into them', () => {
  const dir = mkdtempSync(join(tmpdir(), 'engine-onnx-weights-'));
  const engine = new TrainEngine();
  const base = join(dir, 'base');
  const cfg = TINY_CONFIG;
  const vocab = cfg.vocab_size;

  beforeAll(async () => {
    await engine.request('create_tiny', { out_dir: base, config: cfg, seed: 5 });
  });
  afterAll(async () => {
    await engine.shutdown();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Checks that the refreshed graphs at `onnxPath` compute what a full trace of the same weights
   * computes (a new engine, with no graphs traced yet, loads `modelDir`, the weights next to them,
   * and exports), and what
   * PyTorch and transformers compute for the engine's current policy.
   */
  async function checkAgainstFullExport(onnxPath: string, modelDir: string, tag: string): Promise<void> {
    const full = await exportInNewEngine(modelDir, join(dir, `trace-${tag}`));
    expect(full.graphs).toBe('traced');
    const refreshed = await Graphs.open(onnxPath, cfg);
    const traced = await Graphs.open(full.onnx!, cfg);
    try {
      for (const ids of BATCH) {
        // The same graph and the same weight bytes: the same numbers, not merely close ones.
        expect(Array.from(await refreshed.logits(ids))).toEqual(Array.from(await traced.logits(ids)));
        expect(Array.from(await refreshed.decodeLogits(ids))).toEqual(Array.from(await traced.decodeLogits(ids)));
      }
      const torch = (await engine.request('logits', { input_ids: [IDS] })).logits[0].flat();
      expect(maxDiff(await refreshed.logits(IDS), torch)).toBeLessThan(TOL);
      expect(maxDiff(await refreshed.decodeLogits(IDS), torch.slice(-vocab))).toBeLessThan(TOL);
      const reference = (await engine.request('generate', { input_ids: [IDS], max_new_tokens: GREEDY })).tokens[0];
      expect(await refreshed.greedy(IDS, reference.length, vocab)).toEqual(reference);
    } finally {
      await Promise.all([refreshed.release(), traced.release()]);
    }
  }

  it('full fine-tuning: the first export traces, later ones write weights that a full export reproduces', async () => {
    await engine.request('load', { model_dir: base, optimizer: { lr: 5e-2 } });
    const v0 = await engine.request('export', { dir: join(dir, 'full-v0'), format: 'onnx' });
    expect(v0.graphs).toBe('traced');
    const before = await Graphs.open(v0.onnx!, cfg);
    const logits0 = await before.logits(IDS);
    await before.release();
    for (let i = 0; i < 2; i++) await engine.request('sft_step', { input_ids: BATCH, mask: MASK });
    const v1 = await engine.request('export', { dir: join(dir, 'full-v1'), format: 'onnx' });
    expect(v1).toMatchObject({
      graphs: 'weights',
      onnx: join(dir, 'full-v1', 'onnx', 'model.onnx'),
      decode_onnx: join(dir, 'full-v1', 'onnx', 'decode.onnx'),
    });
    // The update moved the policy, so equal logits below are not those of an unchanged graph.
    const after = await Graphs.open(v1.onnx!, cfg);
    expect(maxDiff(await after.logits(IDS), logits0)).toBeGreaterThan(1e-2);
    await after.release();
    await checkAgainstFullExport(v1.onnx!, join(dir, 'full-v1'), 'v1');
  });

  it('LoRA: the merged export is refreshed the same way', async () => {
    await engine.request('load', {
      model_dir: base,
      seed: 0,
      lora: { r: 4, alpha: 8, target_modules: ['q_proj', 'v_proj', 'down_proj'] },
      optimizer: { lr: 5e-2 },
    });
    for (let i = 0; i < 2; i++) await engine.request('sft_step', { input_ids: BATCH, mask: MASK });
    const v = await engine.request('export', { dir: join(dir, 'lora-v1'), format: 'onnx' });
    // The merged model has the base model's layout, traced by the first test.
    expect(v).toMatchObject({ graphs: 'weights', onnx: join(dir, 'lora-v1', 'merged', 'onnx', 'model.onnx') });
    await checkAgainstFullExport(v.onnx!, join(dir, 'lora-v1', 'merged'), 'lora');
  });

  it('external data: one weight file for both graphs, and the policy dir loads wherever it is moved', async () => {
    await engine.request('load', { model_dir: base, optimizer: { lr: 5e-2 } });
    await engine.request('sft_step', { input_ids: BATCH, mask: MASK });
    const inside = await engine.request('export', { dir: join(dir, 'inside'), format: 'onnx', external_data: false });
    const outside = await engine.request('export', { dir: join(dir, 'outside'), format: 'onnx', external_data: true });
    expect(outside.graphs).toBe('weights');
    expect(readdirSync(join(dir, 'outside', 'onnx')).sort()).toEqual(['decode.onnx', 'model.onnx', 'model.onnx_data']);
    expect(readdirSync(join(dir, 'inside', 'onnx')).sort()).toEqual(['decode.onnx', 'model.onnx']);
    cpSync(join(dir, 'outside'), join(dir, 'moved'), { recursive: true });
    rmSync(join(dir, 'outside'), { recursive: true });
    const a = await Graphs.open(inside.onnx!, cfg);
    const b = await Graphs.open(join(dir, 'moved', 'onnx', 'model.onnx'), cfg);
    try {
      expect(Array.from(await b.logits(IDS))).toEqual(Array.from(await a.logits(IDS)));
      expect(Array.from(await b.decodeLogits(IDS))).toEqual(Array.from(await a.decodeLogits(IDS)));
    } finally {
      await Promise.all([a.release(), b.release()]);
    }
    await checkAgainstFullExport(join(dir, 'moved', 'onnx', 'model.onnx'), join(dir, 'moved'), 'moved');
  });

  it('a model of another architecture and tensor layout is traced anew, and the first layout is still reused', async () => {
    const qwenCfg = TinyModelConfigSchema.parse({ ...cfg, architecture: 'qwen2' });
    const qwen = join(dir, 'qwen');
    await engine.request('create_tiny', { out_dir: qwen, config: qwenCfg, seed: 6 });
    await engine.request('load', { model_dir: qwen });
    const q = await engine.request('export', { dir: join(dir, 'qwen-v0'), format: 'onnx' });
    expect(q.graphs).toBe('traced');
    const graphs = await Graphs.open(q.onnx!, qwenCfg);
    try {
      const torch = (await engine.request('logits', { input_ids: [IDS] })).logits[0].flat();
      expect(maxDiff(await graphs.logits(IDS), torch)).toBeLessThan(TOL);
      expect(maxDiff(await graphs.decodeLogits(IDS), torch.slice(-vocab))).toBeLessThan(TOL);
    } finally {
      await graphs.release();
    }
    await engine.request('load', { model_dir: base });
    expect((await engine.request('export', { dir: join(dir, 'back'), format: 'onnx' })).graphs).toBe('weights');
    expect(existsSync(join(dir, 'back', 'onnx', 'decode.onnx'))).toBe(true);
  });
});
