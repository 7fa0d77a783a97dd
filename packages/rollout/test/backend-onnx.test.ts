/**
 * The `onnx` backend on a real tiny model exported by the train engine: seeded sampling,
 * KV cache against full recomputation, left-padded batches, sampling-distribution logprobs
 * checked against the PyTorch engine at 0.7 and 1.3, stop rules, hot reload, and input errors.
 */
import { cpSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  GenerationInputError,
  type OnnxBackend,
  modelDetokenizer,
  openBackend,
  openOnnxBackend,
  type Generation,
} from '../src/backends/index';
import { loadTokenizer } from '../src/chat/tokenizer';
import { TrainEngine } from '../../trainer-ctl/src/engine';
import { scratchDir } from './backend-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';

const dir = scratchDir('onnx');
let modelA: string;
let modelB: string;
let backend: OnnxBackend;
const prompts: number[][] = [];

const expectSame = (a: Generation[], b: Generation[]) => {
  expect(a.map((g) => g.tokenIds)).toEqual(b.map((g) => g.tokenIds));
  a.forEach((g, i) => g.logprobs.forEach((lp, t) => expect(lp).toBeCloseTo(b[i].logprobs[t], 4)));
};

beforeAll(async () => {
  modelA = await createTinyModel(join(dir, 'a'), 1);
  modelB = await createTinyModel(join(dir, 'b'), 2);
  backend = await openOnnxBackend({ model_dir: modelA });
  const tok = loadTokenizer(modelA);
  for (const text of ['search_traces(parent_span_id)', 'ts-order-service returned 500 after 3021 ms', 'ok']) prompts.push(tok.encode(text));
});
afterAll(async () => {
  await backend.close();
});

describe('onnx backend', () => {
  it('reads the KV-cache layout from the export', () => {
    expect(backend.info).toMatchObject({ modelDir: modelA, version: 1, kvCache: true });
  });

  it('gives the same tokens for the same seed and other tokens for another seed', async () => {
    const req = (seed: number) => [{ promptIds: prompts[0], sampling: { seed, max_tokens: 24 } }];
    const [a] = await backend.generate(req(7));
    const [b] = await backend.generate(req(7));
    const [c] = await backend.generate(req(8));
    expect(a.tokenIds).toHaveLength(24);
    expect(b).toEqual(a);
    expect(c.tokenIds).not.toEqual(a.tokenIds);
    expect(a.finishReason).toBe('length');
    expect(a.text).toBe(modelDetokenizer(modelA).decode(a.tokenIds));
  });

  it('generates the same with the KV cache as recomputing the whole sequence each step', async () => {
    const off = await openOnnxBackend({ model_dir: modelA, kv_cache: 'off' });
    // Greedy: where a random model's distribution is near uniform, float rounding could move a sampled token.
    const reqs = prompts.map((p, i) => ({ promptIds: p, sampling: { temperature: 0, max_tokens: 16 - 5 * i } }));
    expectSame(await backend.generate(reqs), await off.generate(reqs));
    await off.close();
  });

  it('gives each row of a left-padded batch what it gives alone, also after other rows finished', async () => {
    const reqs = prompts.map((p, i) => ({ promptIds: p, sampling: { temperature: 0, max_tokens: 14 - 4 * i } }));
    const batch = await backend.generate(reqs);
    const alone = [];
    for (const r of reqs) alone.push(...(await backend.generate([r])));
    expectSame(batch, alone);
  });

  it("reports logprobs of the temperature-scaled distribution that sampled, equal to the engine's at the same temperature; a first update on them has ratio 1 (issue 8 acceptance 1)", async () => {
    const temps = [0.7, 1.3];
    const gens = await backend.generate(
      temps.map((temperature, i) => ({ promptIds: prompts[i], sampling: { seed: 3 + i, max_tokens: 12, temperature } })),
    );
    const seqs = gens.map((g, i) => [...prompts[i], ...g.tokenIds]);
    // Aligned with the ids: 0 on prompt tokens, the rollout's logprob on generated ones.
    const old = gens.map((g, i) => [...prompts[i].map(() => 0), ...g.logprobs]);
    const mask = gens.map((g, i) => [...prompts[i].map(() => 0), ...g.tokenIds.map(() => 1)]);
    const engine = new TrainEngine();
    try {
      await engine.request('load', { model_dir: modelA, optimizer: { lr: 1e-3 } });
      const { logprobs } = await engine.request('logprobs', { input_ids: seqs, temperature: temps });
      const diffs = gens.flatMap((g, i) => g.logprobs.map((lp, t) => Math.abs(lp - logprobs[i][prompts[i].length + t])));
      expect(Math.max(...diffs)).toBeLessThan(1e-4);
      // The old definition (raw distribution, T = 1) is far off at these temperatures.
      const raw = (await engine.request('logprobs', { input_ids: seqs, temperature: 1 })).logprobs;
      expect(Math.max(...gens.flatMap((g, i) => g.logprobs.map((lp, t) => Math.abs(lp - raw[i][prompts[i].length + t]))))).toBeGreaterThan(
        1e-2,
      );
      for (let step = 0; step < 2; step++) {
        const r = await engine.request('grpo_step', { input_ids: seqs, mask, old, advantages: [1, -1], temperature: temps });
        if (step === 0) {
          expect(Math.abs(r.ratio_mean - 1)).toBeLessThan(1e-4);
          expect(r.clip_fraction).toBe(0);
        } else {
          // The second update is off-policy by one step: the ratio moved, so the check above could fail.
          expect(Math.abs(r.ratio_mean - 1)).toBeGreaterThan(1e-4);
        }
      }
    } finally {
      await engine.shutdown();
    }
  });

  it('decodes greedily at temperature 0 and when top-p keeps one token', async () => {
    const [greedy] = await backend.generate([{ promptIds: prompts[2], sampling: { temperature: 0, max_tokens: 12, top_logprobs: 3 } }]);
    greedy.tokenIds.forEach((id, t) => {
      const top = [...greedy.topLogprobs![t]];
      expect(top).toHaveLength(3);
      expect(top[0][0]).toBe(id);
      expect(top[0][1]).toBeCloseTo(greedy.logprobs[t], 10);
    });
    const [nucleus] = await backend.generate([{ promptIds: prompts[2], sampling: { seed: 9, top_p: 1e-6, max_tokens: 12 } }]);
    expect(nucleus.tokenIds).toEqual(greedy.tokenIds);
  });

  it('stops at a stop string, cutting the text before it', async () => {
    const [free] = await backend.generate([{ promptIds: prompts[0], sampling: { temperature: 0, max_tokens: 20 } }]);
    const det = modelDetokenizer(modelA);
    const stop = det.decode(free.tokenIds.slice(6, 8));
    const full = det.decode(free.tokenIds);
    const [cut] = await backend.generate([{ promptIds: prompts[0], sampling: { temperature: 0, max_tokens: 20, stop: [stop] } }]);
    expect(cut.finishReason).toBe('stop');
    expect(cut.text).toBe(full.slice(0, full.indexOf(stop)));
    expect(cut.tokenIds).toEqual(free.tokenIds.slice(0, cut.tokenIds.length));
    expect(cut.tokenIds.length).toBeLessThanOrEqual(8);
  });

  it('stops at an end-of-sequence id from generation_config.json and keeps it in the ids but not the text', async () => {
    const [free] = await backend.generate([{ promptIds: prompts[0], sampling: { temperature: 0, max_tokens: 20 } }]);
    const eos = free.tokenIds[4];
    const copy = join(dir, 'eos');
    cpSync(modelA, copy, { recursive: true, filter: (src) => !src.endsWith('.onnx') && !src.endsWith('.bin') });
    symlinkSync(join(modelA, 'onnx', 'model.onnx'), join(copy, 'onnx', 'model.onnx'));
    writeFileSync(join(copy, 'generation_config.json'), JSON.stringify({ eos_token_id: [eos] }));
    const b = await openOnnxBackend({ model_dir: copy });
    const [g] = await b.generate([{ promptIds: prompts[0], sampling: { temperature: 0, max_tokens: 20 } }]);
    const first = free.tokenIds.indexOf(eos);
    expect(g.finishReason).toBe('stop');
    expect(g.tokenIds).toEqual(free.tokenIds.slice(0, first + 1));
    expect(g.text).toBe(modelDetokenizer(modelA).decode(free.tokenIds.slice(0, first)));
    await b.close();
  });

  it('reloads a new policy between requests; a request already running finishes on the old one', async () => {
    const req = [{ promptIds: prompts[1], sampling: { seed: 21, max_tokens: 32 } }];
    const fresh = async (m: string) => {
      const b = await openOnnxBackend({ model_dir: m });
      const out = await b.generate(req);
      await b.close();
      return out;
    };
    const expectA = await fresh(modelA);
    const expectB = await fresh(modelB);
    expect(expectB[0].tokenIds).not.toEqual(expectA[0].tokenIds);
    const live = await openOnnxBackend({ model_dir: modelA });
    const running = live.generate(req);
    await live.reload(modelB);
    expectSame(await running, expectA);
    expectSame(await live.generate(req), expectB);
    expect(live.info).toMatchObject({ modelDir: modelB, version: 2 });
    await live.reload(join(modelA, 'onnx', 'model.onnx'));
    expectSame(await live.generate(req), expectA);
    expect(live.info.version).toBe(3);
    await live.close();
  });

  it('refuses bad input with errors naming the field', async () => {
    const bad = (promptIds: number[], sampling = {}) => backend.generate([{ promptIds, sampling }]);
    await expect(bad([])).rejects.toThrow(/requests\[0\]\.promptIds: the prompt is empty/);
    const vocab = JSON.parse(readFileSync(join(modelA, 'config.json'), 'utf8')).vocab_size;
    await expect(bad([1, vocab])).rejects.toThrow(`token id ${vocab} is outside the vocabulary [0, ${vocab})`);
    await expect(bad([1], { top_p: 0 })).rejects.toThrow(GenerationInputError);
    await expect(bad([1], { top_p: 0 })).rejects.toThrow(/requests\[0\]\.sampling\.top_p/);
    await expect(openBackend({ kind: 'onnx', model_dir: modelA, threds: 2 }, 'rollout.backend')).rejects.toThrow(
      /rollout\.backend: .*threds/,
    );
    await expect(openBackend({ kind: 'sglang' }, 'rollout.backend')).rejects.toThrow(
      /rollout\.backend\.kind: unknown backend "sglang" \(known: onnx, openai, vllm\)/,
    );
    await expect(openOnnxBackend({ model_dir: join(dir, 'missing') })).rejects.toThrow(/missing/);
  });
});
