/**
 * The onnx backend's prompt cache (prompt-cache.ts, issue 29): a prompt that starts like one run
 * before (an episode's next turn, a shared system prompt) prefills only its new chunks on the
 * cached key/values; a prompt run before is served as it came out. What the cache changes is
 * read from the feeds that reached onnxruntime; what it must not change is checked against
 * transformers' `generate` in the train engine (greedy tokens equal, log-probabilities within
 * 1e-4) and against a backend without the cache (sampled tokens and log-probabilities bit for
 * bit, whatever ran before). Both cache layouts run every test, as in backend-batching.test.ts.
 */
import { cpSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { openOnnxBackend, type Generation, type OnnxBackend, type OnnxSettings } from '../src/backends/index';
import { loadTokenizer } from '../src/chat/tokenizer';
import { scratchDir } from './backend-fixtures';
import { TrainEngine } from '../../trainer-ctl/src/engine';
import { createTinyModel } from '../../../testkit/tiny-model';

const dir = scratchDir('prompt-cache');
const models = { 'shared-prefix decode graph': join(dir, 'tiny'), 'whole-cache graph': join(dir, 'tiny-no-decode') };
const NEW_TOKENS = 10;
/** prefill_chunk of these tests: the prompts span several chunks. */
const CHUNK = 16;

const TEXT =
  'the request entered at ts-ui-dashboard, called ts-travel-service, which called ts-route-service and ts-order-service; ' +
  'search_traces(parent_span_id) shows span s3 of ts-route-service took 3021 ms and returned 500, then ' +
  'search_fluctuating_metrics on ts-order-service: cpu rose from 12 to 97 percent at 08:43, while ts-basic-service ' +
  'and ts-station-service stayed at their baseline; the logs of ts-route-service show a connection refused to mysql';

/** A: a first turn; B, C: the next turns (A plus more); D: another case sharing A's first 20 tokens; E: nothing shared. */
const p: Record<'A' | 'B' | 'C' | 'D' | 'E', number[]> = { A: [], B: [], C: [], D: [], E: [] };
/** transformers' greedy tokens and log-probabilities of each prompt. */
const reference: Record<string, { tokens: number[]; logprobs: number[] }> = {};

beforeAll(async () => {
  const model = await createTinyModel(models['shared-prefix decode graph'], 7);
  cpSync(model, models['whole-cache graph'], { recursive: true });
  rmSync(join(models['whole-cache graph'], 'onnx', 'decode.onnx'));
  const ids = loadTokenizer(model).encode(TEXT);
  expect(ids.length).toBeGreaterThan(90);
  Object.assign(p, {
    A: ids.slice(0, 40),
    B: ids.slice(0, 60),
    C: ids.slice(0, 85),
    D: [...ids.slice(0, 20), ...ids.slice(50, 75)],
    E: ids.slice(30, 70),
  });
  const engine = new TrainEngine();
  try {
    await engine.request('load', { model_dir: model });
    const names = Object.keys(p) as (keyof typeof p)[];
    const out = await engine.request('generate', { input_ids: names.map((n) => p[n]), max_new_tokens: NEW_TOKENS });
    names.forEach((n, i) => (reference[n] = { tokens: out.tokens[i], logprobs: out.logprobs[i] }));
  } finally {
    await engine.shutdown();
  }
}, 300_000);
afterEach(() => {
  vi.restoreAllMocks();
});

const sessions = (ort.InferenceSession as unknown as { prototype: ort.InferenceSession }).prototype;

interface PrefillRun {
  /** Prompt tokens the run computed (a chunk of one token would pass for a decode step: the tests have none). */
  tokens: number;
  /** Cached positions it started from. */
  cached: number;
}

/** Every prefill run from now on: the runs that feed more than one new token (a decode step feeds one). */
function recordPrefills(): PrefillRun[] {
  const runs: PrefillRun[] = [];
  const run = sessions.run;
  vi.spyOn(sessions, 'run').mockImplementation(function (this: ort.InferenceSession, ...args: Parameters<typeof run>) {
    const feeds = args[0] as Record<string, ort.Tensor>;
    const tokens = feeds.input_ids.dims[1];
    if (tokens > 1) {
      const cached = feeds.prefix_mask
        ? (feeds.prefix_mask.data as Float32Array).filter((x) => x === 0).length
        : feeds['past_key_values.0.key'].dims[2];
      runs.push({ tokens, cached });
    }
    return run.apply(this, args);
  });
  return runs;
}

async function greedy(backend: OnnxBackend, name: keyof typeof p): Promise<Generation> {
  const [g] = await backend.generate([{ promptIds: p[name], sampling: { temperature: 0, max_tokens: NEW_TOKENS } }]);
  expect(g.tokenIds).toEqual(reference[name].tokens);
  const worst = Math.max(...g.logprobs.map((lp, t) => Math.abs(lp - reference[name].logprobs[t])));
  expect(worst).toBeLessThan(1e-4);
  return g;
}

describe.each(Object.keys(models) as (keyof typeof models)[])('onnx backend prompt cache, %s', (layout) => {
  const open = (s: Partial<OnnxSettings> = {}) =>
    openOnnxBackend({ model_dir: models[layout], threads: 1, prompt_cache_mb: 256, prefill_chunk: CHUNK, ...s });

  it("prefills in chunks, and an episode's next turn or a prompt sharing the start of another only past the cached whole chunks, generating what transformers does", async () => {
    const backend = await open();
    try {
      const runs = recordPrefills();
      for (const name of ['A', 'B', 'C', 'D', 'E'] as const) await greedy(backend, name);
      const cold = [
        { tokens: 16, cached: 0 },
        { tokens: 16, cached: 16 },
        { tokens: 8, cached: 32 },
      ];
      expect(runs).toEqual([
        // A: 40 tokens from nothing.
        ...cold,
        // B: A's 40 tokens are cached, of them 2 whole chunks.
        { tokens: 16, cached: 32 },
        { tokens: 12, cached: 48 },
        // C: B's 60, of them 3 chunks.
        { tokens: 16, cached: 48 },
        { tokens: 16, cached: 64 },
        { tokens: 5, cached: 80 },
        // D: the first 20 tokens of A, of them 1 chunk.
        { tokens: 16, cached: 16 },
        { tokens: 13, cached: 32 },
        // E: nothing.
        ...cold,
      ]);
    } finally {
      await backend.close();
    }
  });

  it('serves a prompt run before as it came out, without running it: the same seed samples the same tokens and log-probabilities', async () => {
    const backend = await open();
    try {
      const sampled = (seed: number) => backend.generate([{ promptIds: p.C, sampling: { temperature: 1, seed, max_tokens: NEW_TOKENS } }]);
      const [first] = await sampled(3);
      const runs = recordPrefills();
      const [again] = await sampled(3);
      const [other] = await sampled(4);
      expect(runs).toEqual([]);
      expect(again).toEqual(first);
      expect(other.tokenIds).not.toEqual(first.tokenIds);
    } finally {
      await backend.close();
    }
  });

  it('samples the same tokens and log-probabilities bit for bit whatever the cache held, as a backend without it', async () => {
    const warm = await open();
    const none = await open({ prompt_cache_mb: 0 });
    try {
      const sampled = (b: OnnxBackend, name: keyof typeof p) =>
        b.generate([{ promptIds: p[name], sampling: { temperature: 1, seed: 5, max_tokens: NEW_TOKENS } }]);
      // The warm backend holds prompts that C and D share 40, 60 and 20 tokens with, none a whole number of chunks.
      for (const name of ['A', 'B', 'E'] as const) await sampled(warm, name);
      for (const name of ['C', 'D'] as const) {
        const runs = recordPrefills();
        const [fromCache] = await sampled(warm, name);
        const [cold] = await sampled(none, name);
        vi.restoreAllMocks();
        expect(runs.find((r) => r.cached > 0)).toBeDefined();
        expect(fromCache).toEqual(cold);
      }
    } finally {
      await warm.close();
      await none.close();
    }
  });

  it('drops the least recently used prompts past prompt_cache_mb, and keeps none at 0', async () => {
    // A 40-token prompt holds float32 key/values (createTinyModel: 2 layers x key and value x 2 KV heads x 16 a token) and its logits.
    const { vocab_size: vocab } = JSON.parse(readFileSync(join(models[layout], 'config.json'), 'utf8')) as { vocab_size: number };
    const fortyBytes = 40 * (2 * 2 * 2 * 16 * 4) + vocab * 4;
    const small = await open({ prompt_cache_mb: (1.5 * fortyBytes) / 2 ** 20 });
    const none = await open({ prompt_cache_mb: 0 });
    try {
      const runs = recordPrefills();
      // Room for one prompt: E pushes A out, so B is prefilled from nothing.
      for (const name of ['A', 'E', 'B'] as const) await greedy(small, name);
      for (const name of ['A', 'B'] as const) await greedy(none, name);
      const forty = [0, 16, 32].map((cached) => ({ tokens: cached < 32 ? 16 : 8, cached }));
      const sixty = [0, 16, 32, 48].map((cached) => ({ tokens: cached < 48 ? 16 : 12, cached }));
      expect(runs).toEqual([...forty, ...forty, ...sixty, ...forty, ...sixty]);
    } finally {
      await small.close();
      await none.close();
    }
  });

  it('starts a reloaded policy version with an empty cache', async () => {
    const backend = await open();
    try {
      await greedy(backend, 'A');
      await backend.reload(models[layout]);
      const runs = recordPrefills();
      await greedy(backend, 'B');
      expect(runs.map((r) => r.cached)).toEqual([0, 16, 32, 48]);
    } finally {
      await backend.close();
    }
  });
});
