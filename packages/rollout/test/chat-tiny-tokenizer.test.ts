import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { createExpert, ExpertSettingsSchema, loadDataset, runEpisode, type Dataset, type EpisodeRecord } from '@thinkfl/env';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { fixtureModelDir } from '../fixtures/chat-models/assemble';
import { allToolSpecs, datasetOperations, loadChatModel, tokenizeEpisode, writeTinyTokenizer, type ChatModel } from '../src/chat/index';

let ds: Dataset;
let tiny: ChatModel;
let outDir: string;
let vocabSize: number;
const episodes: EpisodeRecord[] = [];

beforeAll(async () => {
  const dir = await ensureNezhaDataset();
  ds = await loadDataset(dir);
  outDir = mkdtempSync(join(tmpdir(), 'tiny-tok-'));
  ({ vocabSize } = await writeTinyTokenizer(outDir, dir));
  tiny = loadChatModel(outDir);
  // Held-out cases: the tokenizer was fitted on a spread of 40; these are the last three.
  for (const c of ds.cases.slice(-3)) {
    episodes.push(await runEpisode({ dataset: ds, case: c, policy: createExpert(ds, ExpertSettingsSchema.parse({})) }));
  }
});

describe('tiny tokenizer fitted to the Nezha dataset', () => {
  it('writes a model directory the real tokenizer library loads', () => {
    expect(existsSync(join(outDir, 'tokenizer.json'))).toBe(true);
    const cfg = JSON.parse(readFileSync(join(outDir, 'tokenizer_config.json'), 'utf8'));
    expect(cfg.eos_token).toBe('<|im_end|>');
    expect(cfg.chat_template).toContain('<tool_call>');
    expect(tiny.tokenizer.size).toBe(vocabSize);
    expect(vocabSize).toBeGreaterThan(1500);
    expect(vocabSize).toBeLessThan(2400);
    expect(tiny.tokenizer.encode('<|im_start|>assistant\n<tool_call>')).toEqual([
      tiny.tokenizer.requireId('<|im_start|>'),
      tiny.tokenizer.requireId('assistant'),
      tiny.tokenizer.requireId('\n'),
      tiny.tokenizer.requireId('<tool_call>'),
    ]);
  });

  it('names the model copies are single tokens: services, pods, operations, tools', () => {
    const names = [
      ...ds.topology.services,
      ...ds.topology.pods.map((p) => p.pod),
      ...datasetOperations(ds),
      ...allToolSpecs().map((t) => t.name),
    ];
    for (const n of names) expect(tiny.tokenizer.encode(n), n).toHaveLength(1);
    const svc = ds.topology.services[0];
    expect(tiny.tokenizer.encode(` ${svc}=`)).toEqual([
      tiny.tokenizer.requireId(' '),
      tiny.tokenizer.requireId(svc),
      tiny.tokenizer.requireId('='),
    ]);
  });

  it('numbers are split into 1-3 digit chunks, left to right', () => {
    const ids = tiny.tokenizer.encode('1674981788');
    expect(ids.map((i) => tiny.tokenizer.decode([i]))).toEqual(['167', '498', '178', '8']);
  });

  it('round-trips real episodes and any text, byte fallback included', () => {
    const tools = allToolSpecs();
    for (const rec of episodes) {
      const text = tiny.template.render(rec.messages, { tools, addGenerationPrompt: true });
      expect(tiny.tokenizer.decode(tiny.tokenizer.encode(text))).toBe(text);
      for (const m of rec.messages) expect(tiny.tokenizer.decode(tiny.tokenizer.encode(m.content))).toBe(m.content);
    }
    const odd = 'latency 5 µs → 2× usual; 服务 ts-order-service 🚆\r\n\ttab';
    expect(tiny.tokenizer.decode(tiny.tokenizer.encode(odd))).toBe(odd);
  });

  it('episodes take fewer tokens than with a 151k-token backbone vocabulary', () => {
    const tools = allToolSpecs();
    const qwen = loadChatModel(fixtureModelDir('qwen2.5-instruct'));
    for (const rec of episodes) {
      const t = tokenizeEpisode(rec.messages, tiny.template, tiny.tokenizer, { tools });
      const q = tokenizeEpisode(rec.messages, qwen.template, qwen.tokenizer, { tools });
      const chars = tiny.tokenizer.decode(t.ids).length;
      expect(t.ids.length).toBeLessThan(q.ids.length);
      expect(chars / t.ids.length).toBeGreaterThan(2.5);
    }
  });

  it('its chat template carries tools and is prefix-stable, with masks on the assistant turns', () => {
    const tools = allToolSpecs();
    const rec = episodes[0];
    const prompt = tiny.template.render(rec.messages.slice(0, 2), { tools, addGenerationPrompt: true });
    for (const t of tools) expect(prompt).toContain(`{"name": "${t.name}", "description": `);
    const { ids, mask } = tokenizeEpisode(rec.messages, tiny.template, tiny.tokenizer, { tools });
    const assistants = rec.messages.filter((m) => m.role === 'assistant').map((m) => `${m.content}<|im_end|>`);
    const generated = tiny.tokenizer.decode(ids.filter((_, i) => mask[i] === 1));
    expect(generated).toBe(assistants.join(''));
    const shorter = tokenizeEpisode(rec.messages.slice(0, 5), tiny.template, tiny.tokenizer, { tools });
    expect(ids.slice(0, shorter.ids.length)).toEqual(shorter.ids);
  });
});
