/**
 * The traced ONNX graphs outlive the engine process (engine/thinkfl_engine/onnx_graph_cache.py):
 * a new engine exporting a layout that an earlier one traced reads the graphs from the cache
 * instead of tracing, and writes the same files, byte for byte, as an engine that traces them
 * (whose graphs engine-onnx-weights.test.ts checks against PyTorch and transformers). A cache entry
 * that is cut short or names a weight the model does not have is traced again, with a warning
 * naming it, and replaced; another layout has an entry of its own.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TinyModelConfigSchema, TrainEngine } from '../src/engine';
import { TINY_CONFIG } from './engine-fixtures';

const IDS = [1, 5, 6, 7, 8, 9, 10, 11, 3];
const BATCH = [IDS, [1, 12, 13, 14, 15, 16, 17, 18, 2]];
const MASK = BATCH.map((row) => row.map((_, t) => (t >= 3 ? 1 : 0)));

/** The export of the model in modelDir by a new engine with `cache` (null: none), and that engine's log. */
async function exportInNewEngine(modelDir: string, out: string, cache: string | null) {
  let log = '';
  const engine = new TrainEngine({ onStderr: (t) => (log += t) });
  try {
    await engine.request('load', { model_dir: modelDir });
    const result = await engine.request('export', { dir: out, format: 'onnx', graph_cache: cache });
    return { result, log };
  } finally {
    await engine.shutdown();
  }
}

const bytesOf = (onnxDir: string) => readdirSync(onnxDir).map((f) => [f, readFileSync(join(onnxDir, f))] as const);

describe('ONNX graphs kept for the next engine (workers.train.onnx_graph_cache)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'engine-onnx-graph-cache-'));
  const cache = join(dir, 'cache');
  const trained = join(dir, 'trained');
  const qwen = join(dir, 'qwen');
  let entry: string;
  let traced: (readonly [string, Buffer])[];

  beforeAll(async () => {
    // A policy a few updates away from its initial weights, and a model of another architecture.
    const engine = new TrainEngine();
    try {
      await engine.request('create_tiny', { out_dir: join(dir, 'base'), config: TINY_CONFIG, seed: 5 });
      await engine.request('load', { model_dir: join(dir, 'base'), optimizer: { lr: 5e-2 } });
      for (let i = 0; i < 2; i++) await engine.request('sft_step', { input_ids: BATCH, mask: MASK });
      await engine.request('export', { dir: trained, format: 'weights' });
      await engine.request('create_tiny', {
        out_dir: qwen,
        config: TinyModelConfigSchema.parse({ ...TINY_CONFIG, architecture: 'qwen2' }),
        seed: 6,
      });
    } finally {
      await engine.shutdown();
    }
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('the first engine traces and stores; a new engine reads them and writes the same bytes as a trace', async () => {
    const first = await exportInNewEngine(trained, join(dir, 'first'), cache);
    expect(first.result.graphs).toBe('traced');
    const entries = readdirSync(cache);
    expect(entries).toHaveLength(1);
    entry = join(cache, entries[0]);
    expect(readdirSync(entry).sort()).toEqual(['decode.onnx', 'model.onnx', 'sources.json']);

    const second = await exportInNewEngine(trained, join(dir, 'second'), cache);
    expect(second.result.graphs).toBe('cached');
    const uncached = await exportInNewEngine(trained, join(dir, 'uncached'), null);
    expect(uncached.result.graphs).toBe('traced');
    traced = bytesOf(join(dir, 'uncached', 'onnx'));
    expect(traced.map(([f]) => f).sort()).toEqual(['decode.onnx', 'model.onnx']);
    expect(bytesOf(join(dir, 'second', 'onnx'))).toEqual(traced);
    expect(bytesOf(join(dir, 'first', 'onnx'))).toEqual(traced);
    // The stored graph holds no weights: at least their bytes (model.safetensors, less its header) smaller.
    const stored = readFileSync(join(entry, 'model.onnx')).length;
    const weights = statSync(join(trained, 'model.safetensors')).size;
    expect(traced.find(([f]) => f === 'model.onnx')![1].length - stored).toBeGreaterThan(0.95 * weights);
  });

  it('an entry cut short, then one naming a weight the model lacks, is traced again with a warning naming it, and replaced', async () => {
    truncateSync(join(entry, 'decode.onnx'), 100);
    const cut = await exportInNewEngine(trained, join(dir, 'after-cut'), cache);
    expect(cut.result.graphs).toBe('traced');
    expect(cut.log).toContain(`onnx graph cache ${entry} unreadable`);
    expect(bytesOf(join(dir, 'after-cut', 'onnx'))).toEqual(traced);

    // The replaced entry reads (else this would be "unreadable" again) but names another weight.
    const file = join(entry, 'sources.json');
    const listing = JSON.parse(readFileSync(file, 'utf8')) as Record<string, [number, string, boolean][]>;
    listing['model.onnx'][0][1] = 'model.no_such_weight';
    writeFileSync(file, JSON.stringify(listing));
    const misfit = await exportInNewEngine(trained, join(dir, 'after-misfit'), cache);
    expect(misfit.result.graphs).toBe('traced');
    expect(misfit.log).toContain(`onnx graph cache ${entry} does not fit this model (model.onnx: no tensor model.no_such_weight)`);
    expect(bytesOf(join(dir, 'after-misfit', 'onnx'))).toEqual(traced);
  });

  it('a model of another architecture has an entry of its own; the replaced entry serves the first layout', async () => {
    let log = '';
    const engine = new TrainEngine({ onStderr: (t) => (log += t) });
    try {
      await engine.request('load', { model_dir: qwen });
      expect((await engine.request('export', { dir: join(dir, 'qwen-v0'), format: 'onnx', graph_cache: cache })).graphs).toBe('traced');
      expect(readdirSync(cache)).toHaveLength(2);
      // This engine traced only the Qwen layout: the Llama one comes from the entry the last test replaced.
      await engine.request('load', { model_dir: trained });
      expect((await engine.request('export', { dir: join(dir, 'again'), format: 'onnx', graph_cache: cache })).graphs).toBe('cached');
    } finally {
      await engine.shutdown();
    }
    expect(log).not.toContain('onnx graph cache');
    expect(bytesOf(join(dir, 'again', 'onnx'))).toEqual(traced);
  });
});
