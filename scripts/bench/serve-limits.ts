/**
 * Benchmark: how `trainer-ctl serve` holds up while it refuses or cancels big work, the timings
 * that serve-limits.test.ts no longer bounds (they stretch with the machine's load). Starts the
 * real command over a model directory (default a fresh tiny model), then measures the latency of
 * GET /v1/models sent one after another while the server refuses a 30 MB text prompt, a 30 MB
 * chat message, 30 MB of token ids and a 470 K character prompt it must count, and the time from
 * 20 clients hanging up mid-generation until nothing runs. Baseline, measured in the same run:
 * GET /v1/models on the idle server; ratios are printed against its p50.
 *
 *   npx tsx scripts/bench/serve-limits.ts [--model DIR]
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ensureNezhaDataset, REPO_ROOT } from '../../testkit/nezha';

const { values } = parseArgs({ options: { /** Model directory to serve; default a fresh tiny model. */ model: { type: 'string' } } });
let modelDir = values.model;
if (!modelDir) {
  modelDir = join(mkdtempSync(join(tmpdir(), 'bench-serve-limits-')), 'tiny');
  execFileSync(
    process.execPath,
    ['--import', 'tsx', join(REPO_ROOT, 'scripts', 'create-tiny-model.ts'), '--dataset', await ensureNezhaDataset(), '--out', modelDir],
    { stdio: 'inherit' },
  );
}

const RUNNING = 4;
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
    'tiny',
    '--threads',
    '1',
    '--max-concurrent',
    String(RUNNING),
    '--max-queue',
    '16',
    '--max-body-mb',
    '32',
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
const origin = new URL(url).origin;

const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];
async function modelsMs(): Promise<number> {
  const t0 = performance.now();
  await (await fetch(`${url}/models`)).json();
  return performance.now() - t0;
}
async function metrics(): Promise<Record<string, number>> {
  const text = await (await fetch(`${origin}/metrics`)).text();
  const pairs = text
    .split('\n')
    .map((l) => /^(thinkfl_\w+) (\S+)$/.exec(l))
    .filter((m) => m !== null);
  return Object.fromEntries(pairs.map((m) => [m[1], Number(m[2])]));
}

try {
  const idle: number[] = [];
  for (let i = 0; i < 50; i++) idle.push(await modelsMs());
  const base = quantile(idle, 0.5);
  console.log(
    `CPU ${cpus()[0]?.model} x${cpus().length}, load ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')}; model ${modelDir}`,
  );
  console.log(
    `baseline: GET /v1/models on the idle server, 50 requests: p50 ${base.toFixed(1)} ms, max ${Math.max(...idle).toFixed(1)} ms`,
  );

  const text = 'ts-order-service '.repeat(30e6 / 17);
  const cases: [string, string, () => unknown][] = [
    ['30 MB completions prompt', '/completions', () => ({ model: 'tiny', prompt: text, max_tokens: 2 })],
    ['30 MB chat message', '/chat/completions', () => ({ model: 'tiny', messages: [{ role: 'user', content: text }], max_tokens: 2 })],
    [
      '30 MB of token ids',
      '/completions',
      () => ({ model: 'tiny', prompt: Array.from({ length: 6e6 }, (_, i) => 1000 + (i % 1000)), max_tokens: 2 }),
    ],
    [
      '470 K characters, counted',
      '/completions',
      () => ({ model: 'tiny', prompt: 'ts-order-service search_traces '.repeat(15_000), max_tokens: 2 }),
    ],
  ];
  for (const [what, path, body] of cases) {
    const payload = Buffer.from(JSON.stringify(body()));
    const t0 = performance.now();
    let settled = false;
    const answer = fetch(url + path, { method: 'POST', body: payload, headers: { 'content-type': 'application/json' } }).then(async (r) => {
      await r.text();
      settled = true;
      return r.status;
    });
    const during: number[] = [];
    await new Promise((r) => setTimeout(r, 30));
    while (!settled) during.push(await modelsMs());
    const status = await answer;
    const ms = performance.now() - t0;
    const slowest = Math.max(...during);
    console.log(
      `${what}: HTTP ${status} after ${ms.toFixed(0)} ms; ${during.length} GET /v1/models meanwhile, p50 ${quantile(during, 0.5).toFixed(1)} ms ` +
        `(x${(quantile(during, 0.5) / base).toFixed(1)} idle), slowest ${slowest.toFixed(0)} ms (x${(slowest / base).toFixed(1)} idle, ${((100 * slowest) / ms).toFixed(0)}% of the refusal)`,
    );
  }

  const controllers = Array.from({ length: 20 }, () => new AbortController());
  const long = JSON.stringify({ model: 'tiny', prompt: 'search_traces', max_tokens: 3000, temperature: 0 });
  const settled = Promise.allSettled(controllers.map((c) => fetch(`${url}/completions`, { method: 'POST', body: long, signal: c.signal })));
  while ((await metrics()).thinkfl_generations_running !== RUNNING) await new Promise((r) => setTimeout(r, 20));
  await new Promise((r) => setTimeout(r, 300));
  const t0 = performance.now();
  controllers.forEach((c) => c.abort());
  for (;;) {
    const m = await metrics();
    if (m.thinkfl_generations_running === 0 && m.thinkfl_generations_waiting === 0) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  console.log(
    `20 clients hung up mid-generation: nothing running ${(performance.now() - t0).toFixed(0)} ms later (x${((performance.now() - t0) / base).toFixed(0)} an idle GET /v1/models)`,
  );
  await settled;
} finally {
  server.kill('SIGTERM');
}
