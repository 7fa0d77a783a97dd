/**
 * Continuous batching in the `onnx` backend (issue 11 item 4): concurrent generate() calls, as
 * a rollout worker's episodes make them, decode as one batch; a request that arrives while
 * others run joins at the next step and finished rows leave; and a row generates what it
 * generates alone (tokens equal, log-probabilities within 1e-4) whatever shares its batch.
 * The batch each decode step ran is read from the feeds that reached onnxruntime. Both cache
 * layouts run every test: the export's decode-step graph with shared prompt prefixes
 * (decode.onnx) and, for exports without it, the model graph's own whole-row cache.
 */
import { copyFileSync, cpSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { openOnnxBackend, type Generation, type GenerationRequest, type OnnxBackend } from '../src/backends/index';
import { loadTokenizer } from '../src/chat/tokenizer';
import { scratchDir } from './backend-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';

const dir = scratchDir('batching');
/** The trainer's export (with decode.onnx), and a copy without the decode graph. */
const models = { 'shared-prefix decode graph': join(dir, 'tiny'), 'whole-cache graph': join(dir, 'tiny-no-decode') };
/** Eight prompts of eight different lengths. */
const prompts: number[][] = [];

const TEXT =
  'the request entered at ts-ui-dashboard, called ts-travel-service, which called ts-route-service and ts-order-service; ' +
  'search_traces(parent_span_id) shows span s3 of ts-route-service took 3021 ms and returned 500, then ' +
  'search_fluctuating_metrics on ts-order-service: cpu rose from 12 to 97 percent at 08:43';

beforeAll(async () => {
  const model = await createTinyModel(models['shared-prefix decode graph'], 5);
  expect(existsSync(join(model, 'onnx', 'decode.onnx'))).toBe(true);
  cpSync(model, models['whole-cache graph'], { recursive: true });
  rmSync(join(models['whole-cache graph'], 'onnx', 'decode.onnx'));
  const ids = loadTokenizer(model).encode(TEXT);
  // Windows of 3, 8, ..., 38 tokens at different offsets.
  for (let i = 0; i < 8; i++) prompts.push(ids.slice(2 * i, 2 * i + 3 + 5 * i));
}, 300_000);
afterEach(() => {
  vi.restoreAllMocks();
});

/** InferenceSession is typed as a factory; at run time it is the class whose run() every session calls. */
const sessions = (ort.InferenceSession as unknown as { prototype: ort.InferenceSession }).prototype;

interface DecodeStep {
  /** Rows decoded: on the decode graph, the slots with a position (an empty slot has position 0). */
  rows: number;
  /** Prompt prefixes the step read (the decode graph), or one per row (the whole-cache graph). */
  prefixes: number;
}

/** Every decode step (one new token per row on top of a cache) run from now on. */
function recordDecodeSteps(): DecodeStep[] {
  const steps: DecodeStep[] = [];
  const run = sessions.run;
  vi.spyOn(sessions, 'run').mockImplementation(function (this: ort.InferenceSession, ...args: Parameters<typeof run>) {
    const feeds = args[0] as Record<string, ort.Tensor>;
    if (feeds.prefix_mask) {
      // A prefill runs on the decode graph too: the prompt as new tokens, on an empty prefix (all masked)
      // or, past what the prompt cache holds, on a cached one; a decode step feeds one token a row.
      const prefill = feeds.input_ids.dims[1] > 1 || (feeds.prefix_mask.data as Float32Array).every((x) => x === -Infinity);
      if (prefill) return run.apply(this, args);
      const rows = [...(feeds.position_ids.data as BigInt64Array)].filter((p) => p > 0n).length;
      steps.push({ rows, prefixes: feeds.prefix_mask.dims[0] });
    } else if (feeds.input_ids.dims[1] === 1 && feeds['past_key_values.0.key'].dims[2] > 0)
      steps.push({ rows: feeds.input_ids.dims[0], prefixes: feeds.input_ids.dims[0] });
    return run.apply(this, args);
  });
  return steps;
}
const rowsOf = (steps: DecodeStep[]) => steps.map((s) => s.rows);

const greedy = (i: number, maxTokens: number): GenerationRequest => ({
  promptIds: prompts[i],
  sampling: { temperature: 0, max_tokens: maxTokens },
});

let backend: OnnxBackend;

async function alone(reqs: GenerationRequest[]): Promise<Generation[]> {
  const out: Generation[] = [];
  for (const r of reqs) out.push(...(await backend.generate([r])));
  return out;
}

function expectSame(batched: Generation[], single: Generation[]): void {
  expect(batched.map((g) => g.tokenIds)).toEqual(single.map((g) => g.tokenIds));
  const diff = batched.flatMap((g, i) => g.logprobs.map((lp, t) => Math.abs(lp - single[i].logprobs[t])));
  expect(Math.max(...diff)).toBeLessThan(1e-4);
}

describe.each(Object.keys(models) as (keyof typeof models)[])('onnx backend continuous batching, %s', (layout) => {
  const model = models[layout];
  beforeAll(async () => {
    backend = await openOnnxBackend({ model_dir: model, threads: 1 });
  });
  afterAll(async () => {
    await backend.close();
  });

  it('gives each of 8 concurrent requests with different prompt lengths the greedy tokens and logprobs it gets alone', async () => {
    expect(prompts.map((p) => p.length)).toEqual([3, 8, 13, 18, 23, 28, 33, 38]);
    // Different lengths to generate, so rows leave the batch at different steps.
    const reqs = prompts.map((_, i) => greedy(i, 12 + 3 * i));
    const single = await alone(reqs);
    const steps = recordDecodeSteps();
    const batched = await Promise.all(reqs.map(async (r) => (await backend.generate([r]))[0]));
    expectSame(batched, single);
    expect(steps[0]).toEqual({ rows: 8, prefixes: 8 });
    // One decode step per token of the longest request, not one per token of every request.
    expect(steps.length).toBe(Math.max(...single.map((g) => g.tokenIds.length)) - 1);
    expect(rowsOf(steps)).toEqual(rowsOf(steps).sort((a, b) => b - a));
    expect(steps.at(-1)!.rows).toBeLessThan(8);
  });

  it('lets a request that arrives while others decode join the running batch, and gives it what it gets alone', async () => {
    const first = [greedy(1, 30), greedy(4, 30)];
    const late = greedy(6, 10);
    const single = await alone([...first, late]);
    // The tiny model does not end these early, so the steps below are known.
    expect(single.map((g) => g.tokenIds.length)).toEqual([30, 30, 10]);
    const steps = recordDecodeSteps();
    let lateRun: Promise<Generation[]> | undefined;
    const running = first.map((r, i) =>
      backend.generate([
        {
          ...r,
          // The late request starts once the first one has made 5 tokens.
          onToken: () => {
            if (i === 0 && !lateRun && steps.length >= 4) lateRun = backend.generate([late]);
          },
        },
      ]),
    );
    const batched = (await Promise.all(running)).map((g) => g[0]);
    expect(lateRun).toBeDefined();
    const [lateGen] = await lateRun!;
    expectSame([...batched, lateGen], single);
    // Two rows for 4 steps, three while the late one runs (its first token comes from its prefill), then two again.
    expect(rowsOf(steps)).toEqual([...Array(4).fill(2), ...Array(9).fill(3), ...Array(16).fill(2)]);
  });

  it('decodes a group of 8 samples of one prompt, leaving at different steps, as each one decodes alone', async () => {
    // Sampled at temperature 1 with per-row seeds, past the suffix's first 32 positions.
    const reqs = Array.from(
      { length: 8 },
      (_, i): GenerationRequest => ({ promptIds: prompts[7], sampling: { temperature: 1, seed: 100 + i, max_tokens: 30 + 3 * i } }),
    );
    const single = await alone(reqs);
    expect(Math.max(...single.map((g) => g.tokenIds.length))).toBeGreaterThan(33);
    const steps = recordDecodeSteps();
    const batched = await backend.generate(reqs);
    expectSame(batched, single);
    expect(steps[0]).toEqual({ rows: 8, prefixes: layout === 'shared-prefix decode graph' ? 1 : 8 });
    expect(steps.length).toBe(Math.max(...single.map((g) => g.tokenIds.length)) - 1);
  });

  it('decodes at most maxBatch rows together; the others wait for a place', async () => {
    const small = await openOnnxBackend({ model_dir: model, threads: 1, max_batch: 3 });
    try {
      const reqs = prompts.slice(0, 5).map((_, i) => greedy(i, 6 + 2 * i));
      const single = await alone(reqs);
      const steps = recordDecodeSteps();
      const batched = await small.generate(reqs);
      expectSame(batched, single);
      expect(Math.max(...rowsOf(steps))).toBe(3);
      expect(rowsOf(steps).reduce((a, b) => a + b, 0)).toBe(single.reduce((n, g) => n + g.tokenIds.length - 1, 0));
    } finally {
      await small.close();
    }
  });

  it('fails only the call whose onToken throws; its batch mates generate what they get alone', async () => {
    const single = await alone([greedy(2, 12), greedy(5, 12)]);
    const steps = recordDecodeSteps();
    const [bad, good] = await Promise.allSettled([
      backend.generate([
        {
          ...greedy(3, 12),
          onToken: () => {
            if (steps.length === 3) throw new Error('the client went away');
          },
        },
      ]),
      backend.generate([greedy(2, 12), greedy(5, 12)]),
    ]);
    expect(bad).toMatchObject({ status: 'rejected', reason: new Error('the client went away') });
    expect(good.status).toBe('fulfilled');
    expectSame((good as PromiseFulfilledResult<Generation[]>).value, single);
    expect(rowsOf(steps).slice(0, 4)).toEqual([3, 3, 3, 2]);
  });

  it('fails every request of a batch when the model fails, in a prefill or a decode step, and decodes again afterwards', async () => {
    const single = await alone([greedy(2, 8)]);
    const run = sessions.run;
    // Runs: the two prefills, then decode steps.
    for (const failing of [1, 2, 4]) {
      let calls = 0;
      vi.spyOn(sessions, 'run').mockImplementation(function (this: ort.InferenceSession, ...args: Parameters<typeof run>) {
        if (++calls === failing) return Promise.reject(new Error(`onnxruntime failed at run ${failing}`));
        return run.apply(this, args);
      });
      const both = [greedy(2, 8), greedy(3, 8)].map((r) => backend.generate([r]));
      for (const p of both) await expect(p).rejects.toThrow(`onnxruntime failed at run ${failing}`);
      vi.restoreAllMocks();
    }
    expectSame(await backend.generate([greedy(2, 8)]), single);
  });
});

describe('onnx backend, a decode.onnx that is not a decode graph', () => {
  it('refuses to load it, naming the file and the inputs it lacks', async () => {
    const bad = join(dir, 'tiny-bad-decode');
    cpSync(models['whole-cache graph'], bad, { recursive: true });
    copyFileSync(join(bad, 'onnx', 'model.onnx'), join(bad, 'onnx', 'decode.onnx'));
    const refused = await openOnnxBackend({ model_dir: bad, threads: 1 }).then(
      () => undefined,
      (e: Error) => e.message,
    );
    expect(refused).toContain(
      `${join(bad, 'onnx', 'decode.onnx')}: not a decode-step graph for 2 layers (missing prefix_mask, suffix_mask, prefix.0.key`,
    );
    // The model graph alone still serves it.
    const plain = await openOnnxBackend({ model_dir: bad, threads: 1, kv_cache: 'off' });
    try {
      expect((await plain.generate([greedy(0, 3)]))[0].tokenIds).toHaveLength(3);
    } finally {
      await plain.close();
    }
  });
});
