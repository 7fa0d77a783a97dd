/**
 * Benchmark: generation speed of the `onnx` backend on the tiny model (batch 1 and batch 8 on
 * one prompt, 8 concurrent calls on 8 cases' prompts, with and without the KV cache) and the
 * train engine's step time, next to a plain PyTorch forward of the same model on the same
 * tokens, all measured in this run. The prompts are chat prompts (with tools) of real Nezha
 * cases. Prints medians and ratios.
 *
 *   npx tsx scripts/bench/onnx-generation.ts [--model DIR] [--tokens N] [--reps N] [--threads N]
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { getTool, loadDataset, toolSpec } from '@thinkfl/env';
import { loadChatModel, openOnnxBackend, type GenerationRequest, type OnnxBackend } from '@thinkfl/rollout';
import { TrainEngine } from '../../packages/trainer-ctl/src/engine/index';
import { ensureNezhaDataset, REPO_ROOT } from '../../testkit/nezha';

const { values } = parseArgs({
  options: {
    /** Model directory to measure; default a fresh tiny model from scripts/create-tiny-model.ts. */
    model: { type: 'string' },
    /** Tokens generated per request. */
    tokens: { type: 'string', default: '64' },
    /** Timed repetitions per measurement (the median is printed). */
    reps: { type: 'string', default: '5' },
    /** onnxruntime intra-op threads, the backend's `threads` (0: onnxruntime's choice, all cores; the tiny-cpu preset runs 1). */
    threads: { type: 'string', default: '0' },
  },
});
const tokens = Number(values.tokens);
const reps = Number(values.reps);

const datasetDir = await ensureNezhaDataset();
let modelDir = values.model;
if (!modelDir) {
  modelDir = join(mkdtempSync(join(tmpdir(), 'bench-onnx-')), 'tiny');
  execFileSync(
    process.execPath,
    ['--import', 'tsx', join(REPO_ROOT, 'scripts', 'create-tiny-model.ts'), '--dataset', datasetDir, '--out', modelDir],
    { stdio: 'inherit' },
  );
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
async function timeMs(f: () => Promise<unknown>): Promise<number> {
  await f(); // warm-up: first runs pay for allocation and graph preparation
  const ms: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    await f();
    ms.push(performance.now() - t0);
  }
  return median(ms);
}

const dataset = await loadDataset(datasetDir);
const chat = loadChatModel(modelDir);
const tools = ['search_traces', 'search_fluctuating_metrics', 'print_results'].map((n) => toolSpec(getTool(n)!));
/** The chat prompt (with tools) of a real case. */
const promptOf = (c: (typeof dataset.cases)[number]) =>
  chat.tokenizer.encode(
    chat.template.render(
      [
        { role: 'system', content: 'Localize the root cause of the anomalous request.' },
        {
          role: 'user',
          content: `The request's entry span is ${c.entry_span_id} (trace ${c.trace_id}, service ${dataset.traces.span(c.entry_span_id)?.service}).`,
        },
      ],
      { tools, addGenerationPrompt: true },
    ),
  );
const c = dataset.cases[0];
const promptIds = promptOf(c);
/** Eight cases' prompts: as a rollout worker's concurrent episodes of different cases start them. */
const casePrompts = dataset.cases.slice(0, 8).map(promptOf);
const config = JSON.parse(readFileSync(join(modelDir, 'config.json'), 'utf8'));
console.log(`model ${modelDir}: vocab ${config.vocab_size}, hidden ${config.hidden_size}, layers ${config.num_hidden_layers}`);
console.log(
  `prompt: ${promptIds.length} tokens (chat prompt with tools of case ${c.id}); ${tokens} generated tokens per request, median of ${reps}`,
);

// A row may end early at an end-of-sequence token: only tokens actually generated are counted.
const requests = (n: number, prompts = [promptIds]): GenerationRequest[] =>
  Array.from({ length: n }, (_, i) => ({
    promptIds: prompts[i % prompts.length],
    sampling: { seed: i, max_tokens: tokens, temperature: 1 },
  }));
async function tokensPerSecond(b: OnnxBackend, batch: number): Promise<number> {
  let generated = 0;
  const ms = await timeMs(async () => {
    generated = (await b.generate(requests(batch))).reduce((n, g) => n + g.tokenIds.length, 0);
  });
  return generated / (ms / 1000);
}
/** Eight concurrent generate() calls of one request each, on eight cases' prompts (a rollout worker's episodes). */
async function concurrentTokensPerSecond(b: OnnxBackend): Promise<number> {
  let generated = 0;
  const ms = await timeMs(async () => {
    const gens = await Promise.all(requests(8, casePrompts).map((r) => b.generate([r])));
    generated = gens.reduce((n, [g]) => n + g.tokenIds.length, 0);
  });
  return generated / (ms / 1000);
}

const threads = Number(values.threads);
const cached = await openOnnxBackend({ model_dir: modelDir, max_batch: 8, threads });
const uncached = await openOnnxBackend({ model_dir: modelDir, kv_cache: 'off', max_batch: 8, threads });
const b1 = await tokensPerSecond(cached, 1);
const b8 = await tokensPerSecond(cached, 8);
const c8 = await concurrentTokensPerSecond(cached);
const nc1 = await tokensPerSecond(uncached, 1);
console.log(`onnx generate, batch 1, KV cache:  ${b1.toFixed(0)} tokens/s`);
console.log(`onnx generate, batch 8, KV cache:  ${b8.toFixed(0)} tokens/s (${(b8 / b1).toFixed(2)}x batch 1)`);
const lengths = casePrompts.map((p) => p.length);
console.log(
  `onnx generate, 8 concurrent calls, 8 cases' prompts (${Math.min(...lengths)}-${Math.max(...lengths)} tokens), KV cache:  ${c8.toFixed(0)} tokens/s (${(c8 / b1).toFixed(2)}x batch 1)`,
);
console.log(`onnx generate, batch 1, no cache:  ${nc1.toFixed(0)} tokens/s (KV cache is ${(b1 / nc1).toFixed(2)}x faster)`);

// One forward over whole sequences: onnx (prefill of one generation step) vs PyTorch (engine logprobs op).
const full = (await cached.generate(requests(8))).map((g) => [...promptIds, ...g.tokenIds]);
const onnxForward = await timeMs(() =>
  cached.generate(full.map((ids) => ({ promptIds: ids, sampling: { max_tokens: 1, temperature: 0 } }))),
);
const engine = new TrainEngine();
try {
  await engine.request('load', { model_dir: modelDir, optimizer: { lr: 1e-5 } });
  const torchForward = await timeMs(() => engine.request('logprobs', { input_ids: full }));
  const mask = full.map((ids) => ids.map((_, t) => (t >= promptIds.length ? 1 : 0)));
  const sft = await timeMs(() => engine.request('sft_step', { input_ids: full, mask }));
  const grpo = await timeMs(() => engine.request('grpo_step', { input_ids: full, mask, advantages: full.map((_, i) => (i % 2 ? 1 : -1)) }));
  const shape = `[8, ${full[0].length}]`;
  console.log(
    `forward ${shape}: onnx ${onnxForward.toFixed(1)} ms, pytorch ${torchForward.toFixed(1)} ms (onnx is ${(torchForward / onnxForward).toFixed(2)}x pytorch)`,
  );
  console.log(
    `engine step ${shape}: sft ${sft.toFixed(1)} ms, grpo ${grpo.toFixed(1)} ms (${(grpo / torchForward).toFixed(2)}x a pytorch forward)`,
  );
} finally {
  await engine.shutdown();
  await cached.close();
  await uncached.close();
}
