/** The SFT loop on the real engine: learning-rate schedule, loss going down on teacher samples, time budget. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDataset, spreadCases } from '@thinkfl/env';
import { loadChatModel, writeTinyTokenizer, type TokenizedEpisode } from '@thinkfl/rollout';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { TinyModelConfigSchema, TrainEngine } from '../src/engine';
import { sampleTokens, sftSample } from '../src/sft/index';
import { sft, sftLr, SftSettingsSchema } from '../src/algo/sft/schedule';
import { teacherEpisodes } from '@thinkfl/env';

const engine = new TrainEngine();
const modelDir = mkdtempSync(join(tmpdir(), 'sft-train-'));
let samples: TokenizedEpisode[];
const load = () => engine.request('load', { model_dir: modelDir, seed: 0 });

beforeAll(async () => {
  const dir = await ensureNezhaDataset();
  const dataset = await loadDataset(dir);
  const tok = await writeTinyTokenizer(modelDir, dir);
  const config = TinyModelConfigSchema.parse({
    vocab_size: tok.vocabSize,
    eos_token_id: tok.eosTokenId,
    pad_token_id: tok.padTokenId,
    hidden_size: 32,
    num_hidden_layers: 1,
    num_attention_heads: 2,
    num_key_value_heads: 2,
    head_dim: 16,
    intermediate_size: 64,
  });
  await engine.request('create_tiny', { out_dir: modelDir, config, seed: 0 });
  const chat = loadChatModel(modelDir);
  const data = await teacherEpisodes({
    dataset,
    cases: spreadCases(dataset.cases, 40),
    episode: { tool_settings: { span_aliases: true } },
  });
  samples = data.episodes.slice(0, 2).map((e) => sftSample(e, chat, { renderTools: false }));
}, 180_000);
afterAll(async () => {
  await engine.shutdown();
});

describe('sft', () => {
  it('warms the learning rate up to its peak, then decays it to the floor by the last step', () => {
    const s = SftSettingsSchema.parse({ warmup_steps: 4, min_lr_ratio: 0.1 });
    const lrs = Array.from({ length: 20 }, (_, i) => sftLr(s, 1e-2, i, 20));
    expect(lrs.slice(0, 5).every((lr, i) => i === 0 || lr > lrs[i - 1])).toBe(true);
    expect(lrs[4]).toBeCloseTo(1e-2, 12);
    expect(lrs.slice(4).every((lr, i) => i === 0 || lr < lrs[i + 3])).toBe(true);
    expect(lrs[19]).toBeCloseTo(1e-3, 12);
  });

  it('lowers the loss on teacher conversations over epochs and counts the trained tokens', async () => {
    expect(samples).toHaveLength(2);
    await load();
    const report = await sft(engine, samples, { epochs: 4, batch_size: 1, warmup_steps: 1, min_lr_ratio: 0.1 }, { lr: 1e-2 });
    expect(report.steps).toBe(8);
    expect(report.epochs).toBe(4);
    expect(report.epochLoss[3]).toBeLessThan(report.epochLoss[0] * 0.8);
    expect(report.tokens).toBe(4 * sampleTokens(samples).trained);
  });

  it('stops at the time budget and refuses an empty sample set', async () => {
    await load();
    const report = await sft(
      engine,
      samples,
      { epochs: 50, batch_size: 1, warmup_steps: 10, min_lr_ratio: 0.1 },
      { lr: 3e-3, timeBudgetS: 1e-3 },
    );
    expect(report.steps).toBe(1);
    expect(report.epochLoss).toHaveLength(1);
    await expect(sft(engine, [], {}, { lr: 3e-3 })).rejects.toThrow(/no samples/);
  });
});
