/**
 * The memory estimate of the backbone presets (src/config/memory.ts): parameter counts against the
 * model cards' published totals, one preset's estimate against a hand computation, every preset
 * passing `config validate` with its estimate printed, and a preset that declares too little GPU
 * memory (or too few GPUs) failing with the numbers. Issue 25: with the replica asleep during
 * updates, the update is checked against the whole GPU and what a rank keeps between updates
 * against what the awake replica leaves; the sampling and staleness that colocated mode and
 * vLLM's processed log-probabilities need are refused otherwise, naming the YAML path.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadRunConfig, type RunConfig } from '../src/config';
import { baseParameters, estimateMemory } from '../src/config/memory';
import { REPO_ROOT } from '../../../testkit/nezha';

const BACKBONES = ['llama-3.2-3b', 'qwen2.5-3b', 'qwen2.5-0.5b', 'llama-3-8b'];
const GIB = 1024 ** 3;
const tmp = mkdtempSync(join(tmpdir(), 'thinkfl-config-memory-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function load(name: string): RunConfig {
  return loadRunConfig(join(REPO_ROOT, 'configs', `${name}.yaml`), { checkPaths: false }).config;
}

function cli(...args: string[]) {
  const r = spawnSync(process.execPath, [join(REPO_ROOT, 'packages/trainer-ctl/bin/trainer-ctl.mjs'), ...args], {
    cwd: REPO_ROOT,
    encoding: 'utf8',
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A copy of a preset with some lines replaced, in a temporary directory (base_dir made absolute). */
function variant(name: string, replace: [RegExp, string][]): string {
  let text = readFileSync(join(REPO_ROOT, 'configs', `${name}.yaml`), 'utf8').replace(/base_dir: \.\./, `base_dir: ${REPO_ROOT}`);
  for (const [from, to] of replace) {
    expect(text).toMatch(from);
    text = text.replace(from, to);
  }
  const file = join(tmp, `${name}-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, text);
  return file;
}

describe('memory estimate', () => {
  // Total parameters on each model card (huggingface.co/<hub_id>): 3.21B, 3.09B, 0.49B, 8.03B.
  it.each([
    ['llama-3.2-3b', 3.21e9],
    ['qwen2.5-3b', 3.09e9],
    ['qwen2.5-0.5b', 0.49e9],
    ['llama-3-8b', 8.03e9],
  ])("counts %s at its model card's parameter total", (name, published) => {
    const n = baseParameters(load(name).model.architecture!);
    expect(Math.abs(n - published) / published).toBeLessThan(0.01);
  });

  it('matches a hand computation for qwen2.5-3b (LoRA r 32, ZeRO-2 bf16, 1 rank, 32768 tokens, 80 GiB shared at 0.45)', () => {
    const e = estimateMemory(load('qwen2.5-3b'));
    // Base: embedding 151936*2048 = 311,164,928 (tied head); per layer q 2048*2048 + k,v 2*2048*256
    // + o 2048*2048 + biases 2048+512 + MLP 3*2048*11008 + norms 2*2048 = 77,076,992, x36
    // = 2,774,771,712; + final norm 2048 -> 3,085,938,688.
    // LoRA r 32 per layer: q 4096 + k 2304 + v 2304 + o 4096 + gate/up/down 3*13056 = 51,968; x32 x36 = 59,867,136.
    expect(e.trainable).toBe(59_867_136);
    expect(e.parameters).toBe(3_085_938_688 + 59_867_136);
    expect(e.zeroStage).toBe(2);
    expect(e.train.weights).toBe(6_291_611_648); // 3,145,805,824 x 2 bytes
    expect(e.train.gradients).toBe(119_734_272); // 59,867,136 x 2 bytes
    expect(e.train.optimizer).toBe(718_405_632); // 59,867,136 x 12 bytes (fp32 master, m, v)
    expect(e.train.reference).toBe(0);
    // 36*32768*2048*2 = 4,831,838,208 (layer inputs) + 2*32768*(4*2048 + 20*128 + 16*128 + 4*11008)
    // = 3,724,541,952 (one layer recomputed) + 3*1024*151936*4 = 1,866,989,568 (head chunk).
    expect(e.train.activations).toBe(10_423_369_728);
    expect(e.train.total).toBe(17_553_121_280);
    expect(e.train.budget).toBeCloseTo(80 * 0.55 * GIB, 0);
    // vLLM: 3,085,938,688 x 2 + one adapter 59,867,136 x 2 + KV 2*36*2*128*2 bytes x 32768 = 1,207,959,552.
    expect(e.vllm).toMatchObject({ weights: 6_171_877_376, adapters: 119_734_272, kvCache: 1_207_959_552, total: 7_499_571_200 });
    expect(e.vllm!.budget).toBeCloseTo(80 * 0.45 * GIB, 0);
    expect(e.problems).toEqual([]);
  });

  it('shards the optimizer, then gradients, then weights over the ranks with the ZeRO stage', () => {
    const c = load('llama-3-8b');
    const one = estimateMemory(c);
    c.workers.train.ranks = 2;
    const two = estimateMemory(c);
    expect(two.train.optimizer).toBe(one.train.optimizer / 2);
    expect(two.train.gradients).toBe(one.train.gradients / 2);
    expect(two.train.weights).toBe(one.train.weights);
    c.workers.train.deepspeed_config = join(REPO_ROOT, 'configs', 'deepspeed', 'zero3.json');
    expect(estimateMemory(c).train.weights).toBe(one.train.weights / 2);
  });
});

describe('trainer-ctl config validate with resources', () => {
  it.each(BACKBONES)('passes %s and prints its estimate', (name) => {
    const r = cli('config', 'validate', `configs/${name}.yaml`);
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/memory estimate/);
    expect(r.stdout).toMatch(
      /train rank: weights [\d.]+ GiB \+ gradients [\d.]+ GiB \+ optimizer [\d.]+ GiB \+ reference [\d.]+ GiB \+ activations [\d.]+ GiB = [\d.]+ GiB of [\d.]+ GiB/,
    );
    expect(r.stdout).toMatch(/vLLM replica: weights [\d.]+ GiB \+ adapters [\d.]+ GiB \+ KV cache [\d.]+ GiB = [\d.]+ GiB of [\d.]+ GiB/);
    expect(r.stdout).toMatch(new RegExp(`: ok \\(run ${name.replace(/\./g, '\\.')},`));
  });

  it('fails a preset that declares too little GPU memory, naming the estimate', () => {
    const file = variant('qwen2.5-3b', [[/gpu_memory_gib: 80/, 'gpu_memory_gib: 24']]);
    const r = cli('config', 'validate', '--no-paths', file);
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(/train rank: .* = 16\.35 GiB of 13\.20 GiB/);
    expect(r.stderr).toBe(
      `${file}: resources: a train rank needs at least 16.35 GiB (weights 5.86 GiB + gradients 0.11 GiB + optimizer 0.67 GiB + ` +
        'reference 0.00 GiB + activations 9.71 GiB) but has 13.20 GiB (resources.gpu_memory_gib 24 x ' +
        '(1 - vllm_gpu_memory_utilization 0.45), colocated with vLLM)\n',
    );
  });

  it('fails a vLLM share too small for the weights and one full-context KV cache', () => {
    const file = variant('llama-3-8b', [[/vllm_gpu_memory_utilization: 0\.9/, 'vllm_gpu_memory_utilization: 0.15']]);
    const r = cli('config', 'validate', '--no-paths', file);
    expect(r.status).toBe(1);
    // 8,030,261,248 x 2 bytes = 14.96 GiB of weights alone exceed 80 x 0.15 = 12 GiB.
    expect(r.stderr).toMatch(
      /resources: a vLLM replica needs at least 15\.98 GiB \(weights 14\.96 GiB .* KV cache of 8192 tokens 1\.00 GiB\) but has 12\.00 GiB/,
    );
  });

  it('fails a preset that declares fewer GPUs than its ranks and replicas', () => {
    const file = variant('llama-3-8b', [[/gpus: 3/, 'gpus: 2']]);
    const r = cli('config', 'validate', '--no-paths', file);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/resources: needs 3 GPUs \(1 train ranks plus 2 vLLM replicas\) but resources\.gpus is 2/);
  });

  it("refuses resources without the backbone's architecture", () => {
    const file = variant('qwen2.5-0.5b', [[/\n {2}# config\.json.*\n {2}architecture: .*\n/, '\n']]);
    const r = cli('config', 'validate', '--no-paths', file);
    expect(r.status).toBe(1);
    expect(r.stderr).toMatch(/model\.architecture: resources needs model\.architecture/);
  });

  it('with the replica asleep during updates, checks the update against the whole GPU and the rest against what vLLM leaves', () => {
    const sleeping = (mem: number, util: number) =>
      variant('qwen2.5-3b', [
        [/policy_format: weights/, 'policy_format: weights\n    sleep_during_updates: true'],
        [/gpu_memory_gib: 80, vllm_gpu_memory_utilization: 0\.45/, `gpu_memory_gib: ${mem}, vllm_gpu_memory_utilization: ${util}`],
      ]);
    // 24 GiB: the static split above fails (16.35 of 13.20); asleep, the update has all 24, and
    // between updates weights 5.86 + gradients 0.11 + optimizer 0.67 + reference 0 stay beside vLLM's 0.45.
    const ok = cli('config', 'validate', '--no-paths', sleeping(24, 0.45));
    expect(ok.stderr).toBe('');
    expect(ok.status).toBe(0);
    const m = /= 16\.35 GiB of 24\.00 GiB \(vLLM asleep\); between updates ([\d.]+) GiB of 13\.20 GiB beside vLLM/.exec(ok.stdout);
    expect(m, ok.stdout).not.toBeNull();
    expect(Math.abs(Number(m![1]) - (5.86 + 0.11 + 0.67))).toBeLessThanOrEqual(0.01);
    // vLLM at 0.75 of 24 GiB leaves 6.00 GiB: less than the rank keeps.
    const tight = cli('config', 'validate', '--no-paths', sleeping(24, 0.75));
    expect(tight.status).toBe(1);
    expect(tight.stderr).toMatch(
      /resources: between updates a train rank keeps at least [\d.]+ GiB \(weights 5\.86 GiB \+ gradients 0\.11 GiB \+ optimizer 0\.67 GiB \+ reference 0\.00 GiB\) but an awake vLLM replica leaves it 6\.00 GiB \(resources\.gpu_memory_gib 24 x \(1 - vllm_gpu_memory_utilization 0\.75\)\)/,
    );
  });

  it('refuses top_p below 1 with vLLM, and sleeping replicas with rollouts that may overlap an update', () => {
    const topP = cli('config', 'validate', '--no-paths', variant('qwen2.5-3b', [[/top_p: 1\.0/, 'top_p: 0.9']]));
    expect(topP.status).toBe(1);
    expect(topP.stderr).toMatch(
      /:\d+: generation\.sampling\.top_p: 0\.9 with the vllm backend: vLLM's processed_logprobs are renormalized over the top-p nucleus/,
    );
    const stale = cli(
      'config',
      'validate',
      '--no-paths',
      variant('qwen2.5-3b', [
        [/policy_format: weights/, 'policy_format: weights\n    sleep_during_updates: true'],
        [/\nworkers:\n/, '\nworkers:\n  max_staleness: 1\n'],
      ]),
    );
    expect(stale.status).toBe(1);
    expect(stale.stderr).toMatch(/:\d+: generation\.backend\.sleep_during_updates: needs workers\.max_staleness 0 \(it is 1\)/);
  });
});
