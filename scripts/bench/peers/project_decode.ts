/**
 * The project's onnx backend as a decode contender in its own process, as the peers are: every
 * contender starts from a fresh process, whatever the bench's own process hosted before (the GRPO
 * tables' backends; docs/experiments.md, issue 29, 11, found that not to be what slowed batch 1).
 * Run by decode.ts: argv[2] the model dir, argv[3] intra-op threads, argv[4] the
 * largest batch, argv[5] "spin" for onnxruntime's spin-waiting threads. Each stdin line
 * {ids, batch, new_tokens} runs one greedy generation of `batch` copies of the prompt; the answer
 * is {ms, tokens, first}.
 */
import { createInterface } from 'node:readline';
import { openOnnxBackend } from '@thinkfl/rollout';

const [modelDir, threads, maxBatch, spin] = process.argv.slice(2);
// Every run prefills its prompt, as the peers do: without the prompt cache the same prompt is not served from the last run.
const backend = await openOnnxBackend({
  model_dir: modelDir,
  max_batch: Number(maxBatch),
  threads: Number(threads),
  prompt_cache_mb: 0,
  spin: spin === 'spin',
});
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
for await (const line of createInterface({ input: process.stdin })) {
  const { ids, batch, new_tokens } = JSON.parse(line) as { ids: number[]; batch: number; new_tokens: number };
  const t0 = performance.now();
  const gens = await backend.generate(
    Array.from({ length: batch }, () => ({ promptIds: ids, sampling: { max_tokens: new_tokens, temperature: 0 } })),
  );
  const ms = performance.now() - t0;
  process.stdout.write(`${JSON.stringify({ ms, tokens: gens.reduce((n, g) => n + g.tokenIds.length, 0), first: gens[0].tokenIds })}\n`);
}
await backend.close();
