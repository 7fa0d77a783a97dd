/**
 * Benchmark: the policy sync of a GRPO step alone, as the peers bench's project step does it
 * (scripts/bench/peers/grpo.ts): engine `export` (onnx) of the updated policy, then the onnx
 * backend's `reload` of it. Each update is one small SFT step (so the weights change), then the
 * sync, timed; the first export of a run traces the graphs, the later ones write new weights
 * (issue 29). Default model: the peers bench's Qwen2.5-0.5B-shaped model with its LoRA preset.
 *
 *   npx tsx scripts/bench/policy-sync.ts [--model DIR] [--updates N] [--full] [--threads N]
 *
 * --full: full fine-tuning instead of LoRA (r 64 / alpha 128 on every projection).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { openOnnxBackend } from '@thinkfl/rollout';
import { TrainEngine } from '../../packages/trainer-ctl/src/engine/index';
import { loadLine, machine, machineLine } from './peers/measure';

const { values } = parseArgs({
  options: {
    model: { type: 'string', default: join(import.meta.dirname, '..', '..', '.cache', 'models', 'peers-qwen2.5-0.5b-shape') },
    updates: { type: 'string', default: '3' },
    full: { type: 'boolean', default: false },
    threads: { type: 'string' },
  },
});
const threads = values.threads ? Number(values.threads) : cpus().length;
const lora = values.full
  ? null
  : { r: 64, alpha: 128, target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'] };
console.log(machineLine(machine()));
const work = mkdtempSync(join(tmpdir(), 'policy-sync-'));
const engine = new TrainEngine({ onStderr: () => {} });
const backend = await openOnnxBackend({ model_dir: values.model, max_batch: 4, threads });
try {
  await engine.request('load', {
    model_dir: values.model,
    dtype: 'float32',
    threads,
    gradient_checkpointing: true,
    optimizer: { lr: 1e-4 },
    ...(lora && { lora }),
  });
  const ids = [[1, 2, 3, 4, 5, 6, 7, 8]];
  for (let v = 1; v <= Number(values.updates); v++) {
    await engine.request('sft_step', { input_ids: ids, mask: [ids[0].map((_, t) => (t > 2 ? 1 : 0))] });
    const dir = join(work, `v${v}`);
    const t0 = performance.now();
    const exported = await engine.request('export', { dir, format: 'onnx' }, 60 * 60_000);
    const t1 = performance.now();
    await backend.reload(dir, v);
    const t2 = performance.now();
    rmSync(join(work, `v${v - 1}`), { recursive: true, force: true });
    const how = exported.graphs ?? 'traced (every export)';
    console.log(
      `update ${v}: export ${((t1 - t0) / 1000).toFixed(2)} s (graphs ${how}), reload ${((t2 - t1) / 1000).toFixed(2)} s, sync ${((t2 - t0) / 1000).toFixed(2)} s; ${loadLine()}`,
    );
  }
} finally {
  await backend.close();
  await engine.shutdown();
  rmSync(work, { recursive: true, force: true });
}
