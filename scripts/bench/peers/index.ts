/**
 * Benchmark: this project against what users would pick instead, side by side in one run, one
 * table per comparison (issue 29; docs/benchmarks.md has the tables and what was made equal):
 *   grpo    TRL's GRPOTrainer vs the project's pipeline: seconds per GRPO step (generation,
 *           update, policy sync), generated tokens/s; on the tiny model and on a random-init
 *           model of Qwen2.5-0.5B's shape (LoRA, as its preset), --grpo-models
 *   decode  the onnx backend vs onnxruntime-genai and transformers.js on the same export and the
 *           same ~1k-token chat prompt, batch 1 and 8: tokens/s, time to first token, a step's time
 *   tools   search_traces vs a pandas filter of the same spans (the ThinkFL repository's method)
 * The peers' environments are built on first use (env.ts). Each pair runs in the same process
 * tree, alternating, --reps repetitions (--decode-reps for decode) after a warm-up; medians with
 * [min-max].
 *
 *   npm run bench:peers -- [--only grpo,decode,tools] [--reps N] [--decode-reps N] [--threads N] [--grpo-models tiny,qwen2.5-0.5b-shape] [--smallest]
 *
 * --smallest: every comparison at its smallest size (one repetition, few tokens; the test's run).
 */
import { statfsSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { loadDataset } from '@thinkfl/env';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { compareDecode } from './decode';
import { ensurePeersNode, ensurePeersVenv, REPO_ROOT } from './env';
import { compareGrpo } from './grpo';
import { loadLine, machine, machineLine } from './measure';
import { casePromptOf, ensureModel, MODELS, type ModelName } from './models';
import { compareTools } from './tools';

const { values } = parseArgs({
  options: {
    /** Comparisons to run, comma-separated: grpo, decode, tools. */
    only: { type: 'string', default: 'grpo,decode,tools' },
    /** Timed repetitions per contender (after one warm-up). */
    reps: { type: 'string', default: '5' },
    /** Intra-op threads of every contender (torch, onnxruntime); default all cores. */
    threads: { type: 'string' },
    /** Models of the GRPO comparison. */
    'grpo-models': { type: 'string', default: MODELS.join(',') },
    /** Repetitions of the GRPO comparison on the Qwen2.5-0.5B-shaped model (minutes a step on 2 cores). */
    'qwen-reps': { type: 'string', default: '3' },
    /**
     * Repetitions of the decode comparison: a batch-1 generation takes ~0.2 s, and on a shared
     * 2-core VM 5 of them gave batch-1 ratios from 0.62x to 1.19x onnxruntime-genai in three runs
     * of one hour, 15 gave 0.77x and 0.76x (docs/experiments.md, issue 29, 11).
     */
    'decode-reps': { type: 'string', default: '15' },
    smallest: { type: 'boolean', default: false },
  },
});
const only = new Set(values.only.split(','));
const small = values.smallest;
const reps = small ? 1 : Number(values.reps);
const m = machine();
const threads = values.threads ? Number(values.threads) : m.cores;

const datasetDir = await ensureNezhaDataset();
const dataset = await loadDataset(datasetDir);
const peersPython = ensurePeersVenv();
console.log(machineLine(m));
console.log('');

const QWEN_DISK_GB = 25;
const out = (text: string) => console.log(`${text}\n${loadLine()} (after the table)\n`);

if (only.has('grpo')) {
  for (const name of values['grpo-models'].split(',') as ModelName[]) {
    if (!MODELS.includes(name)) throw new Error(`--grpo-models: unknown model ${name}; known: ${MODELS.join(', ')}`);
    if (small && name !== 'tiny') continue;
    const qwen = name === 'qwen2.5-0.5b-shape';
    // The float32 model dir (weights, model.onnx, decode.onnx: ~7 GB) and two policy versions a step
    // writes (LoRA: adapter, merged weights and their two graphs) while the previous is still loaded.
    const fs = statfsSync(join(REPO_ROOT, '.cache'));
    const freeGb = (fs.bavail * fs.bsize) / 2 ** 30;
    if (qwen && freeGb < QWEN_DISK_GB) {
      out(`GRPO step, ${name}: not run: it needs ${QWEN_DISK_GB} GB free disk under .cache and /tmp, ${freeGb.toFixed(1)} GB are free`);
      continue;
    }
    const modelDir = await ensureModel(name, datasetDir);
    const groupSize = small ? 2 : 4;
    out(
      await compareGrpo({
        modelDir,
        label: name,
        prompt: casePromptOf(dataset, modelDir),
        // The tiny-cpu preset's group, episode turn length, stage-1 temperature, learning rate and loss.
        groupSize,
        maxNewTokens: small ? 8 : 48,
        temperature: 1.0,
        lr: qwen ? 1e-6 : 2e-4,
        epsLow: 0.2,
        epsHigh: 0.2,
        klCoef: 0.001,
        // configs/qwen2.5-0.5b.yaml's adapters; the tiny model trains all weights, as its preset.
        lora: qwen
          ? {
              r: 64,
              alpha: 128,
              dropout: 0.05,
              target_modules: ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj'],
            }
          : null,
        threads,
        reps: qwen ? Math.min(reps, Number(values['qwen-reps'])) : reps,
        // The group in one forward/backward pass, as TRL's per_device_train_batch_size = num_generations: its sequences
        // share a prompt and differ by at most max_new_tokens, so a pass pads little (the presets' 1 and 2 are for ragged episodes).
        microBatch: groupSize,
        // tiny-cpu: off (a 1M-parameter model's activations are small); the backbone presets keep the engine's default, on.
        gradientCheckpointing: qwen,
        peersPython,
      }),
    );
  }
}
if (only.has('decode')) {
  const modelDir = await ensureModel('tiny', datasetDir);
  out(
    await compareDecode({
      modelDir,
      dataset,
      newTokens: small ? 4 : 64,
      batches: small ? [1, 2] : [1, 8],
      reps: small ? 1 : Number(values['decode-reps']),
      threads,
      peersPython,
      peersNode: ensurePeersNode(),
    }),
  );
}
if (only.has('tools')) {
  out(await compareTools({ dataset, sample: small ? 200 : 20000, pandasSample: small ? 20 : 500, peersPython }));
}
