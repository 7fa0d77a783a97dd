/**
 * scripts/create-tiny-model.ts end to end on the real Nezha dataset: the model dir it writes is
 * read by the rollout side's chat model, a real episode tokenizes within its vocabulary, the
 * engine trains on it, and the ONNX export gives the same log-probabilities as PyTorch.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadDataset, ReplayPolicy, runEpisode, type Dataset } from '@thinkfl/env';
import { loadChatModel, tokenizeEpisode, type TokenizedEpisode } from '@thinkfl/rollout';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureNezhaDataset, REPO_ROOT } from '../../../testkit/nezha';
import { TrainEngine } from '../src/engine';

const hermes = (name: string, args: unknown) => `<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call>`;

describe('create-tiny-model script', () => {
  const out = join(mkdtempSync(join(tmpdir(), 'tiny-model-')), 'model');
  const engine = new TrainEngine();
  let ds: Dataset;
  let episode: TokenizedEpisode;
  let config: { vocab_size: number; num_hidden_layers: number; num_key_value_heads: number; head_dim: number; eos_token_id: number };

  beforeAll(async () => {
    const datasetDir = await ensureNezhaDataset();
    execFileSync('npx', ['tsx', 'scripts/create-tiny-model.ts', '--dataset', datasetDir, '--out', out], { cwd: REPO_ROOT, stdio: 'pipe' });
    config = JSON.parse(readFileSync(join(out, 'config.json'), 'utf8'));
    ds = await loadDataset(datasetDir);
    const kase = ds.cases[0];
    const ep = await runEpisode({
      dataset: ds,
      case: kase,
      policy: new ReplayPolicy([
        hermes('search_traces', { parent_span_id: kase.entry_span_id }),
        hermes('print_results', { root_causes: [{ pod: kase.truth.pod }] }),
      ]),
    });
    const chat = loadChatModel(out);
    episode = tokenizeEpisode(ep.messages, chat.template, chat.tokenizer);
  });
  afterAll(async () => {
    await engine.shutdown();
  });

  it('writes a model dir whose tokenizer and config agree, and a real episode fits its vocabulary', () => {
    const tokenizer = JSON.parse(readFileSync(join(out, 'tokenizer.json'), 'utf8'));
    const ids = new Set<number>([
      ...Object.values(tokenizer.model.vocab as Record<string, number>),
      ...tokenizer.added_tokens.map((t: { id: number }) => t.id),
    ]);
    expect(config.vocab_size).toBe(ids.size);
    expect(Math.max(...ids)).toBe(config.vocab_size - 1);
    expect(Math.max(...episode.ids)).toBeLessThan(config.vocab_size);
    expect(episode.mask[0]).toBe(0);
    expect(episode.mask.filter(Boolean).length).toBeGreaterThan(10);
    expect(episode.ids).toContain(config.eos_token_id);
  });

  it('trains on the episode and its ONNX export agrees with PyTorch log-probabilities', async () => {
    const loaded = await engine.request('load', { model_dir: out, optimizer: { lr: 1e-3 } });
    expect(loaded.parameters).toBeGreaterThan(1_000_000);
    const batch = { input_ids: [episode.ids], mask: [episode.mask] };
    const first = await engine.request('sft_step', batch);
    const second = await engine.request('sft_step', batch);
    expect(second.loss).toBeLessThan(first.loss);
    const exported = await engine.request('export', { dir: join(out, '..', 'step-2'), format: 'onnx' });
    const torchLp = (await engine.request('logprobs', { input_ids: [episode.ids] })).logprobs[0];

    const session = await ort.InferenceSession.create(exported.onnx!);
    const n = episode.ids.length;
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor('int64', BigInt64Array.from(episode.ids.map(BigInt)), [1, n]),
      attention_mask: new ort.Tensor('int64', new BigInt64Array(n).fill(1n), [1, n]),
      position_ids: new ort.Tensor('int64', BigInt64Array.from(episode.ids.map((_, t) => BigInt(t))), [1, n]),
    };
    for (let i = 0; i < config.num_hidden_layers; i++) {
      for (const kind of ['key', 'value']) {
        feeds[`past_key_values.${i}.${kind}`] = new ort.Tensor('float32', new Float32Array(0), [
          1,
          config.num_key_value_heads,
          0,
          config.head_dim,
        ]);
      }
    }
    const logits = (await session.run(feeds)).logits.data as Float32Array;
    const V = config.vocab_size;
    let worst = 0;
    for (let t = 1; t < n; t++) {
      const row = logits.subarray((t - 1) * V, t * V);
      const max = row.reduce((a, b) => Math.max(a, b), -Infinity);
      const lse = max + Math.log(row.reduce((a, b) => a + Math.exp(b - max), 0));
      worst = Math.max(worst, Math.abs(row[episode.ids[t]] - lse - torchLp[t]));
    }
    expect(worst).toBeLessThan(1e-3);
  });
});
