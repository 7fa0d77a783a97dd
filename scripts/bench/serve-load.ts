/**
 * Benchmark: `trainer-ctl serve` under a bounded loopback load. Starts the real command over a
 * model directory (default a fresh tiny model), then for each concurrency level (default 1, 8
 * and 32 clients, each sending its next request as soon as the last is answered) sends chat
 * completions of a real Nezha case's prompt with tools until the level's request count or time
 * cap is reached, and prints throughput (requests/s, generated tokens/s) and p50/p95 latency.
 * Baseline, measured in the same run: the same request generated in process by the `onnx`
 * backend with no HTTP in between, one at a time; ratios are printed against it.
 *
 *   npx tsx scripts/bench/serve-load.ts [--model DIR] [--levels 1,8,32] [--requests N] [--seconds S] [--tokens N] [--max-concurrent N]
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { getTool, loadDataset, toolSpec } from '@thinkfl/env';
import { loadChatModel, openOnnxBackend } from '@thinkfl/rollout';
import { ensureNezhaDataset, REPO_ROOT } from '../../testkit/nezha';

const { values } = parseArgs({
  options: {
    /** Model directory to serve; default a fresh tiny model from scripts/create-tiny-model.ts. */
    model: { type: 'string' },
    /** Concurrent clients of each level. */
    levels: { type: 'string', default: '1,8,32' },
    /** Most requests per level (the cap on the load). */
    requests: { type: 'string', default: '96' },
    /** Most seconds per level; clients stop sending after it. */
    seconds: { type: 'string', default: '30' },
    /** max_tokens of each request. */
    tokens: { type: 'string', default: '32' },
    /** The server's --max-concurrent. */
    'max-concurrent': { type: 'string', default: '4' },
  },
});
const levels = values.levels.split(',').map(Number);
const maxRequests = Number(values.requests);
const maxSeconds = Number(values.seconds);
const tokens = Number(values.tokens);

const datasetDir = await ensureNezhaDataset();
let modelDir = values.model;
if (!modelDir) {
  modelDir = join(mkdtempSync(join(tmpdir(), 'bench-serve-')), 'tiny');
  execFileSync(
    process.execPath,
    ['--import', 'tsx', join(REPO_ROOT, 'scripts', 'create-tiny-model.ts'), '--dataset', datasetDir, '--out', modelDir],
    { stdio: 'inherit' },
  );
}

const dataset = await loadDataset(datasetDir);
const c = dataset.cases[0];
const tools = ['search_traces', 'search_fluctuating_metrics', 'print_results'].map((n) => toolSpec(getTool(n)!));
const messages = [
  { role: 'system' as const, content: 'Localize the root cause of the anomalous request.' },
  {
    role: 'user' as const,
    content: `The request's entry span is ${c.entry_span_id} (trace ${c.trace_id}, service ${dataset.traces.span(c.entry_span_id)?.service}).`,
  },
];
const body = (seed: number) =>
  JSON.stringify({ model: 'bench', messages, tools: tools.map((t) => ({ type: 'function', function: t })), max_tokens: tokens, seed });

const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];

// Baseline: the backend in process, one request at a time.
const chat = loadChatModel(modelDir);
const promptIds = chat.tokenizer.encode(chat.template.render(messages, { tools, addGenerationPrompt: true }));
const backend = await openOnnxBackend({ model_dir: modelDir, threads: 1 });
await backend.generate([{ promptIds, sampling: { max_tokens: tokens, seed: 0 } }]);
const direct: number[] = [];
let directTokens = 0;
for (let i = 1; i <= 16; i++) {
  const t0 = performance.now();
  const [g] = await backend.generate([{ promptIds, sampling: { max_tokens: tokens, seed: i } }]);
  direct.push(performance.now() - t0);
  directTokens += g.tokenIds.length;
}
await backend.close();
const directP50 = quantile(direct, 0.5);
const directTps = directTokens / (direct.reduce((a, b) => a + b, 0) / 1000);
console.log(`model ${modelDir}; prompt ${promptIds.length} tokens (case ${c.id}, chat with tools), max_tokens ${tokens}`);
console.log(
  `baseline (onnx backend in process, sequential, 16 requests): p50 ${directP50.toFixed(1)} ms, ${directTps.toFixed(0)} tokens/s`,
);

const server = spawn(
  process.execPath,
  [
    join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs'),
    'serve',
    '--model',
    modelDir,
    '--port',
    '0',
    '--name',
    'bench',
    '--threads',
    '1',
    '--max-concurrent',
    values['max-concurrent'],
    '--max-queue',
    String(Math.max(...levels)),
  ],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
const url = await new Promise<string>((resolve, reject) => {
  let out = '';
  server.stdout!.on('data', (b: Buffer) => {
    out += b.toString();
    const m = /serving \S+ at (\S+)/.exec(out);
    if (m) resolve(m[1]);
  });
  server.once('exit', (code) => reject(new Error(`trainer-ctl serve exited with ${code}`)));
});

try {
  for (const level of levels) {
    const latencies: number[] = [];
    let generated = 0;
    let sent = 0;
    let failed = 0;
    const t0 = performance.now();
    const deadline = t0 + maxSeconds * 1000;
    await Promise.all(
      Array.from({ length: level }, async () => {
        while (sent < maxRequests && performance.now() < deadline) {
          const seed = sent++;
          const s = performance.now();
          const r = await fetch(`${url}/chat/completions`, {
            method: 'POST',
            body: body(seed),
            headers: { 'content-type': 'application/json' },
          });
          const json = (await r.json()) as { usage?: { completion_tokens: number } };
          if (r.status !== 200) failed++;
          else {
            latencies.push(performance.now() - s);
            generated += json.usage!.completion_tokens;
          }
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    const p50 = quantile(latencies, 0.5);
    console.log(
      `concurrency ${String(level).padStart(2)}: ${latencies.length} requests in ${seconds.toFixed(1)} s (${failed} refused), ` +
        `${(latencies.length / seconds).toFixed(1)} req/s, ${(generated / seconds).toFixed(0)} tokens/s (${(generated / seconds / directTps).toFixed(2)}x baseline), ` +
        `p50 ${p50.toFixed(0)} ms (${(p50 / directP50).toFixed(2)}x baseline), p95 ${quantile(latencies, 0.95).toFixed(0)} ms`,
    );
  }
} finally {
  server.kill('SIGTERM');
}
