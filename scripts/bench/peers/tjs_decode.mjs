// transformers.js (@huggingface/transformers, from .cache/peers-node) on the project's export, greedy
// decoding: run by decode.ts with NODE_PATH at .cache/peers-node/node_modules.
// argv[2]: the model dir, argv[3]: intra-op threads. Each stdin line {ids, batch, new_tokens} runs one
// generation of `batch` copies of the prompt; the answer is {ms, tokens, first}.
import { createRequire } from 'node:module';
import { basename, dirname, join } from 'node:path';
import { createInterface } from 'node:readline';

const require = createRequire(join(process.env.PEERS_NODE, 'package.json'));
const { AutoModelForCausalLM, Tensor, env } = await import(require.resolve('@huggingface/transformers'));
const [modelDir, threads] = [process.argv[2], Number(process.argv[3])];
env.allowRemoteModels = false;
env.localModelPath = dirname(modelDir);
const model = await AutoModelForCausalLM.from_pretrained(basename(modelDir), {
  dtype: 'fp32',
  device: 'cpu',
  session_options: { intraOpNumThreads: threads, interOpNumThreads: 1 },
});
const eos = model.generation_config.eos_token_id;
const eosIds = new Set(Array.isArray(eos) ? eos : [eos]);
process.stdout.write(`${JSON.stringify({ ready: true, version: env.version })}\n`);
for await (const line of createInterface({ input: process.stdin })) {
  const { ids, batch, new_tokens } = JSON.parse(line);
  const flat = BigInt64Array.from({ length: batch * ids.length }, (_, i) => BigInt(ids[i % ids.length]));
  const t0 = performance.now();
  const input_ids = new Tensor('int64', flat, [batch, ids.length]);
  const attention_mask = new Tensor('int64', new BigInt64Array(flat.length).fill(1n), [batch, ids.length]);
  const outTensor = await model.generate({ input_ids, attention_mask, max_new_tokens: new_tokens, do_sample: false });
  const ms = performance.now() - t0;
  const rows = outTensor.tolist().map((r) => r.slice(ids.length).map(Number));
  const counted = rows.map((r) => {
    const k = r.findIndex((t) => eosIds.has(t));
    return k >= 0 ? r.slice(0, k + 1) : r;
  });
  process.stdout.write(`${JSON.stringify({ ms, tokens: counted.reduce((n, r) => n + r.length, 0), first: counted[0] })}\n`);
}
