/**
 * The real engine training a freshly created tiny model: log-probabilities, SFT, GRPO (with and
 * without old/ref given, micro-batched), the AdamW update against its equations, checkpoint +
 * resume, the KL reference policy, float32 master weights under bfloat16 compute, the measured and
 * cached auto precision, input errors, and the gradient check.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENGINE_PYTHON, TrainEngine, type LoadArgs } from '../src/engine';
import { REPO_ROOT } from '../../../testkit/nezha';
import { readSafetensors, tensorValues } from '../../../testkit/safetensors';
import { RAGGED_IDS, TINY_CONFIG, TINY_VOCAB } from './engine-fixtures';

const VOCAB = TINY_VOCAB;
const CONFIG = TINY_CONFIG;
// Two "episodes": a prompt (mask 0) then generated tokens (mask 1), ragged lengths.
const IDS = RAGGED_IDS;
const MASK = IDS.map((row, i) => row.map((_, t) => (t >= (i === 2 ? 4 : 3) ? 1 : 0)));
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const seqLogp = (lp: number[], m: number[]) => sum(lp.map((v, t) => v * m[t]));

describe('train engine on a tiny model', () => {
  const dir = mkdtempSync(join(tmpdir(), 'engine-train-'));
  const modelDir = join(dir, 'model');
  const engine = new TrainEngine();
  const load = (extra: Partial<LoadArgs> = {}) =>
    engine.request('load', { model_dir: modelDir, seed: 0, optimizer: { lr: 3e-3 }, ...extra });

  beforeAll(async () => {
    const created = await engine.request('create_tiny', { out_dir: modelDir, config: CONFIG, seed: 1 });
    expect(created.parameters).toBeGreaterThan(1000);
  });
  afterAll(async () => {
    await engine.shutdown();
  });

  it('loads the model dir and returns per-token log-probabilities aligned with the ids', async () => {
    const info = await load();
    expect(info).toMatchObject({ kind: 'llama', lora: false, device: 'cpu', step: 0 });
    const { logprobs } = await engine.request('logprobs', { input_ids: IDS });
    expect(logprobs.map((r) => r.length)).toEqual(IDS.map((r) => r.length));
    for (const row of logprobs) {
      expect(row[0]).toBe(0);
      for (const v of row.slice(1)) expect(v).toBeLessThan(0);
    }
    // Padding must not change a sequence's values: each alone equals its row in the batch.
    const alone = await engine.request('logprobs', { input_ids: [IDS[1]] });
    alone.logprobs[0].forEach((v, t) => expect(v).toBeCloseTo(logprobs[1][t], 5));
    await expect(engine.request('logprobs', { input_ids: IDS, model: 'reference' })).rejects.toThrow(/no reference policy/);
    expect(await engine.request('set_reference', { tag: 'grpo_start' })).toEqual({ reference: 'grpo_start', step: 0 });
    const ref = await engine.request('logprobs', { input_ids: IDS, model: 'reference' });
    ref.logprobs[0].forEach((v, t) => expect(v).toBeCloseTo(logprobs[0][t], 6));
  });

  it('SFT steps lower the cross-entropy on generated tokens only', async () => {
    await load();
    const before = await engine.request('logprobs', { input_ids: IDS });
    const first = await engine.request('sft_step', { input_ids: IDS, mask: MASK });
    expect(first.tokens).toBe(sum(MASK.map(sum)));
    const ce = -sum(before.logprobs.map((lp, i) => seqLogp(lp, MASK[i]))) / first.tokens;
    expect(first.loss).toBeCloseTo(ce, 5);
    let last = first;
    for (let k = 0; k < 15; k++) last = await engine.request('sft_step', { input_ids: IDS, mask: MASK });
    expect(last.step).toBe(16);
    expect(last.loss).toBeLessThan(first.loss * 0.7);
    expect(last.grad_norm).toBeGreaterThan(0);
  });

  it('a GRPO step raises the likelihood of the positively advantaged sequence and lowers the negative one', async () => {
    await load();
    await engine.request('set_reference', { tag: 'grpo_start' });
    const before = (await engine.request('logprobs', { input_ids: IDS })).logprobs;
    const out = await engine.request('grpo_step', {
      input_ids: IDS,
      mask: MASK,
      advantages: [1, -1, 0],
      loss: { kl_coef: 0.05, kl_estimator: 'k3' },
    });
    // On-policy: the ratio is 1, nothing is clipped, and the reference equals the policy.
    expect(out.clip_fraction).toBe(0);
    expect(out.kl).toBeCloseTo(0, 6);
    expect(out.pg_loss).toBeCloseTo(-(MASK[0].filter(Boolean).length - MASK[1].filter(Boolean).length) / out.tokens, 6);
    const after = (await engine.request('logprobs', { input_ids: IDS })).logprobs;
    expect(seqLogp(after[0], MASK[0])).toBeGreaterThan(seqLogp(before[0], MASK[0]));
    expect(seqLogp(after[1], MASK[1])).toBeLessThan(seqLogp(before[1], MASK[1]));
    const second = await engine.request('grpo_step', {
      input_ids: IDS,
      mask: MASK,
      advantages: [1, -1, 0],
      old: before,
      loss: { kl_coef: 0.05, kl_estimator: 'k3', eps_low: 0.001, eps_high: 0.001 },
    });
    expect(second.kl).toBeGreaterThan(0);
    expect(second.clip_fraction).toBeGreaterThan(0);
  });

  it('micro-batches give the same loss and gradient norm as the whole batch', async () => {
    const settings = { aggregation: 'seq-mean-token-mean', ratio_level: 'sequence' } as const;
    const args = { input_ids: IDS, mask: MASK, advantages: [0.5, -1, 1.5], loss: settings };
    await load();
    const whole = await engine.request('grpo_step', args);
    await load();
    const parts = await engine.request('grpo_step', { ...args, micro_batch_size: 1 });
    expect(parts.loss).toBeCloseTo(whole.loss, 6);
    expect(parts.grad_norm!).toBeCloseTo(whole.grad_norm!, 5);
    // A budget of 16 padded tokens: rows of 8 and 6 tokens together (2 x 8), the 9-token row alone.
    await load();
    const budget = await engine.request('grpo_step', { ...args, micro_batch_tokens: 16 });
    expect(budget.loss).toBeCloseTo(whole.loss, 6);
    expect(budget.grad_norm!).toBeCloseTo(whole.grad_norm!, 5);
  });

  it('saves a checkpoint and resumes from it with the same weights and step', async () => {
    await load();
    for (let k = 0; k < 3; k++) await engine.request('sft_step', { input_ids: IDS, mask: MASK });
    const ckpt = join(dir, 'ckpt');
    expect(await engine.request('save', { dir: ckpt })).toMatchObject({ step: 3 });
    const trained = (await engine.request('logprobs', { input_ids: IDS })).logprobs;
    const next = await engine.request('sft_step', { input_ids: IDS, mask: MASK });
    expect(await engine.request('load', { model_dir: ckpt, resume: true, optimizer: { lr: 3e-3 } })).toMatchObject({ step: 3 });
    const restored = (await engine.request('logprobs', { input_ids: IDS })).logprobs;
    restored.forEach((row, i) => row.forEach((v, t) => expect(v).toBeCloseTo(trained[i][t], 6)));
    const replay = await engine.request('sft_step', { input_ids: IDS, mask: MASK });
    expect(replay.step).toBe(4);
    expect(replay.loss).toBeCloseTo(next.loss, 5);
    expect(replay.grad_norm!).toBeCloseTo(next.grad_norm!, 4);
  });

  it("moves every weight as AdamW's equations say, computed here from each step's own gradients (two steps, weight decay)", async () => {
    const [lr, wd, b1, b2, eps] = [1e-3, 0.1, 0.9, 0.999, 1e-8];
    // max_grad_norm 0: no clipping, so the returned gradients are the ones the optimizer takes.
    await load({ optimizer: { lr, weight_decay: wd, betas: [b1, b2], eps, max_grad_norm: 0 } });
    const weights = async (name: string) => {
      await engine.request('export', { dir: join(dir, name), format: 'weights' });
      return new Map([...readSafetensors(join(dir, name, 'model.safetensors'))].map(([k, t]) => [k, tensorValues(t)]));
    };
    let before = await weights('adamw-0');
    const m = new Map<string, Float64Array>();
    const v = new Map<string, Float64Array>();
    for (let k = 1; k <= 2; k++) {
      const { gradients } = await engine.request('sft_step', { input_ids: IDS, mask: MASK, gradients: true });
      const after = await weights(`adamw-${k}`);
      let worst = 0;
      let moved = 0;
      for (const [name, g] of Object.entries(gradients!)) {
        const w0 = before.get(name)!;
        const w1 = after.get(name)!;
        const mk = m.get(name) ?? new Float64Array(g.length);
        const vk = v.get(name) ?? new Float64Array(g.length);
        g.forEach((gi, i) => {
          // AdamW (Loshchilov & Hutter, Algorithm 2): decoupled decay, then the bias-corrected moment step.
          mk[i] = b1 * mk[i] + (1 - b1) * gi;
          vk[i] = b2 * vk[i] + (1 - b2) * gi * gi;
          const expected = w0[i] * (1 - lr * wd) - (lr * mk[i]) / (1 - b1 ** k) / (Math.sqrt(vk[i] / (1 - b2 ** k)) + eps);
          worst = Math.max(worst, Math.abs(w1[i] - expected));
          moved = Math.max(moved, Math.abs(w1[i] - w0[i]));
        });
        m.set(name, mk);
        v.set(name, vk);
      }
      expect(Object.keys(gradients!).length).toBeGreaterThan(5);
      expect(moved).toBeGreaterThan(lr / 2);
      expect(worst).toBeLessThan(1e-6);
      before = after;
    }
  });

  it('takes the KL reference when told (after SFT), not at load: KL 0 on the first GRPO step, the same KL after a resume (issue 8 acceptance 2)', async () => {
    const kl = { kl_coef: 0.1, kl_estimator: 'k3' } as const;
    const grpo = () => engine.request('grpo_step', { input_ids: IDS, mask: MASK, advantages: [1, -1, 0.5], loss: kl });
    expect((await load()).reference).toBeNull();
    for (let k = 0; k < 5; k++) await engine.request('sft_step', { input_ids: IDS, mask: MASK });
    // The loaded (pre-SFT) model as reference would be far from the SFT policy: that was the bug.
    await engine.request('set_reference', { tag: 'initial' });
    await load();
    for (let k = 0; k < 5; k++) await engine.request('sft_step', { input_ids: IDS, mask: MASK });
    await engine.request('set_reference', { tag: 'grpo_start' });
    const first = await grpo();
    expect(Math.abs(first.kl)).toBeLessThanOrEqual(1e-6);
    const ckpt = join(dir, 'ckpt-ref');
    expect(await engine.request('save', { dir: ckpt })).toMatchObject({ step: 6, reference: 'grpo_start' });
    const unbroken = [(await grpo()).kl, (await grpo()).kl];
    expect(unbroken[0]).toBeGreaterThan(1e-6);
    // Resume: the reference comes from the checkpoint, not from the weights loaded (which are the step-6 policy).
    expect(await engine.request('load', { model_dir: ckpt, resume: true, seed: 0, optimizer: { lr: 3e-3 } })).toMatchObject({
      step: 6,
      reference: 'grpo_start',
    });
    const resumed = [(await grpo()).kl, (await grpo()).kl];
    resumed.forEach((v, i) => expect(v).toBeCloseTo(unbroken[i], 6));
    // Without resume the checkpoint's reference is not taken over.
    expect((await engine.request('load', { model_dir: ckpt, seed: 0 })).reference).toBeNull();
  });

  it('keeps float32 master weights under bfloat16 compute: an update at lr 1e-6 changes them, and its loss matches float32 (issue 8 acceptance 3)', async () => {
    const step = { input_ids: IDS, mask: MASK, lr: 1e-6 };
    // The logits op runs without autocast on the master weights, so it sees changes far below bfloat16's resolution.
    const logits = async () => (await engine.request('logits', { input_ids: [IDS[0]] })).logits[0];
    const loaded = await load({ dtype: 'bfloat16' });
    expect(loaded.compute_dtype).toBe('bfloat16');
    const before = await logits();
    const bf16 = await engine.request('sft_step', step);
    const after = await logits();
    const moved = Math.max(...before.flatMap((row, t) => row.map((v, j) => Math.abs(v - after[t][j]))));
    // Adam moves every weight by ~lr = 1e-6; weights of size ~0.3 in bfloat16 (8 bits of mantissa) would not move at all.
    expect(moved).toBeGreaterThan(0);
    expect(moved).toBeLessThan(1e-3);
    await load({ dtype: 'float32' });
    const fp32 = await engine.request('sft_step', step);
    // Stated tolerance: bfloat16 rounds the logits to ~3 significant digits, 2e-2 on a cross-entropy of ~3.7.
    expect(Math.abs(bf16.loss - fp32.loss)).toBeLessThan(2e-2);
    expect(bf16.loss).not.toBe(fp32.loss);
  });

  it('auto precision takes the faster of float32 and bfloat16 as measured, kept per CPU model, flags, torch and shape', async () => {
    const cache = mkdtempSync(join(tmpdir(), 'engine-autocast-'));
    const probe = { tokens: 32, reps: 1 };
    const auto = (tokens = probe.tokens) => load({ autocast: 'auto', autocast_cache: cache, autocast_probe: { ...probe, tokens } });
    const first = await auto();
    expect(first.precision).toMatch(
      /^(float32|bfloat16): auto, the faster training pass on this CPU \(.+\): float32 [\d.]+ ms, bfloat16 [\d.]+ ms \(measured now, cached in /,
    );
    const files = readdirSync(cache);
    expect(files).toHaveLength(1);
    const file = join(cache, files[0]);
    const entry = JSON.parse(readFileSync(file, 'utf8')) as {
      key: Record<string, unknown>;
      ms: Record<'float32' | 'bfloat16', number>;
      choice: string;
    };
    // The key against lscpu and the engine's own Python, not against the engine's code.
    const lscpu = execFileSync('lscpu', { encoding: 'utf8', env: { ...process.env, LC_ALL: 'C' } });
    expect(entry.key.cpu_model).toBe(lscpu.match(/^Model name:\s*(.*)$/m)?.[1].trim());
    expect(entry.key.cpu_flags).toEqual([...new Set((lscpu.match(/^Flags:\s*(.*)$/m)?.[1] ?? '').trim().split(/\s+/))].sort());
    expect(entry.key.torch).toBe(
      execFileSync(ENGINE_PYTHON, ['-c', 'import torch; print(torch.__version__)'], { encoding: 'utf8' }).trim(),
    );
    expect(entry.key.shape).toMatchObject({
      hidden_size: CONFIG.hidden_size,
      vocab_size: VOCAB,
      threads: first.threads,
      tokens: probe.tokens,
    });
    // The choice follows the measurement.
    expect(first.compute_dtype).toBe(entry.ms.bfloat16 < entry.ms.float32 ? 'bfloat16' : 'float32');
    expect(entry.choice).toBe(first.compute_dtype);

    // Reused: a load finds its key and times nothing, so the file's times (rewritten here both ways) decide.
    for (const [float32, bfloat16, want] of [
      [5, 9, 'float32'],
      [9, 5, 'bfloat16'],
      [7, 7, 'float32'],
    ] as const) {
      writeFileSync(file, JSON.stringify({ ...entry, ms: { float32, bfloat16 } }));
      const again = await auto();
      expect(again.compute_dtype).toBe(want);
      expect(again.precision).toBe(
        `${want}: auto, the faster training pass on this CPU (${String(entry.key.cpu_model)}): float32 ${float32.toFixed(1)} ms, bfloat16 ${bfloat16.toFixed(1)} ms (cached in ${file})`,
      );
    }
    // A file of another machine under this name (its key differs) is measured over; another shape is another file.
    writeFileSync(file, JSON.stringify({ ...entry, key: { ...entry.key, cpu_model: 'AMD EPYC 7B13' }, ms: { float32: 1, bfloat16: 1e9 } }));
    expect((await auto()).precision).toMatch(/\(measured now, cached in /);
    expect(JSON.parse(readFileSync(file, 'utf8')).key).toEqual(entry.key);
    expect((await auto(48)).precision).toMatch(/\(measured now, cached in /);
    expect(readdirSync(cache)).toHaveLength(2);
    // Without a cache it measures at every load.
    expect((await load({ autocast: 'auto', autocast_probe: probe })).precision).toMatch(/\(measured now\)$/);
    expect((await load({ autocast: 'auto', autocast_probe: probe })).threads).toBe(availableParallelism());
    await expect(load({ autocast: 'auto', autocast_probe: { tokens: 1 } })).rejects.toThrow(/autocast_probe: tokens must be >= 2/);
    await expect(load({ autocast: 'float16' })).rejects.toThrow(/float16 compute is for CUDA/);
  });

  it('the auto measurement times the precisions alternately and takes the fastest pass of each (an injected clock)', () => {
    // bfloat16 passes advance the clock 5, 6, 4, 7 ms (warm-up first), float32 passes 2 ms but the 2nd 100 ms (a load spike).
    const py = [
      'import json, torch',
      'from thinkfl_engine.precision import measure, decide',
      'now, order = [0.0], []',
      'def step(dtype):',
      '    order.append(str(dtype).replace("torch.", ""))',
      '    n = order.count(order[-1])',
      '    now[0] += [0.005, 0.006, 0.004, 0.007][n - 1] if dtype == torch.bfloat16 else (0.1 if n == 3 else 0.002)',
      'ms = measure(step, 3, clock=lambda: now[0])',
      'print(json.dumps({"ms": ms, "order": order, "choice": str(decide(ms))}))',
    ].join('\n');
    const out = JSON.parse(execFileSync(ENGINE_PYTHON, ['-c', py], { encoding: 'utf8', cwd: join(REPO_ROOT, 'engine') })) as {
      ms: Record<string, number>;
      order: string[];
      choice: string;
    };
    expect(out.order).toEqual(['float32', 'bfloat16', 'float32', 'bfloat16', 'float32', 'bfloat16', 'float32', 'bfloat16']);
    expect(out.ms.float32).toBeCloseTo(2, 9);
    expect(out.ms.bfloat16).toBeCloseTo(4, 9);
    expect(out.choice).toBe('torch.float32');
  });

  it('the auto measurement keys an ISA cap set in the environment, so a capped engine gets a cache file of its own', () => {
    // Every KERNEL_ENV variable but the given ones is cleared first: the test's own environment may set any of them.
    const py = [
      'import json, os, sys',
      'from pathlib import Path',
      'from thinkfl_engine.precision import KERNEL_ENV, AutocastProbe',
      'for k in set(KERNEL_ENV) - set(sys.argv[1:]): os.environ.pop(k, None)',
      'p = AutocastProbe(Path("/cache"), {"hidden_size": 8}, lambda dtype: None, 1)',
      'print(json.dumps({"key": p.key, "file": str(p.file())}))',
    ].join('\n');
    const probe = (env: Record<string, string>) =>
      JSON.parse(
        execFileSync(ENGINE_PYTHON, ['-c', py, ...Object.keys(env)], {
          encoding: 'utf8',
          cwd: join(REPO_ROOT, 'engine'),
          env: { ...process.env, ...env },
        }),
      ) as { key: Record<string, unknown>; file: string };
    const plain = probe({});
    const capped = probe({ ONEDNN_MAX_CPU_ISA: 'AVX512_CORE_BF16' });
    const aten = probe({ ATEN_CPU_CAPABILITY: 'avx2' });
    const empty = probe({ ONEDNN_MAX_CPU_ISA: '' });
    // Unset (or empty) leaves the key as before the field existed, so earlier measurements stay valid.
    expect(Object.keys(plain.key).sort()).toEqual(['cpu_flags', 'cpu_model', 'reps', 'shape', 'torch']);
    expect(empty.file).toBe(plain.file);
    expect(capped.key.kernel_env).toEqual({ ONEDNN_MAX_CPU_ISA: 'AVX512_CORE_BF16' });
    expect(aten.key.kernel_env).toEqual({ ATEN_CPU_CAPABILITY: 'avx2' });
    expect(new Set([plain.file, capped.file, aten.file]).size).toBe(3);
  });

  it('rejects malformed batches with errors that say what is wrong', async () => {
    await load();
    const bad = (args: object) => engine.request('grpo_step', { input_ids: IDS, mask: MASK, advantages: [1, 0, -1], ...args });
    await expect(bad({ mask: MASK.slice(1) })).rejects.toThrow(/mask: 2 sequences, expected 3/);
    await expect(bad({ mask: MASK.map((r) => r.map(() => 1)) })).rejects.toThrow(/mask\[0\]\[0\] is 1/);
    await expect(bad({ advantages: [1] })).rejects.toThrow(/advantages: need 3 finite values/);
    await expect(bad({ old: IDS.map((r) => r.slice(1).map(() => -1)) })).rejects.toThrow(/old\[0\]: 7 values, expected 8/);
    await expect(bad({ input_ids: [[1, VOCAB]], mask: [[0, 1]], advantages: [1] })).rejects.toThrow(/outside the model vocabulary/);
    await expect(bad({ loss: { aggregation: 'sum' } })).rejects.toThrow(/aggregation must be one of/);
    await expect(bad({ temperature: [1, 0.7] })).rejects.toThrow(/temperature: 2 values, expected one per sequence \(3\)/);
    await expect(bad({ temperature: 0 })).rejects.toThrow(/temperature\[0\]: need a finite number > 0/);
    await expect(bad({ loss: { kl_coef: 0.1 } })).rejects.toThrow(/no reference policy: send set_reference first/);
  });

  it('passes a float64 gradient check of the GRPO and SFT losses, on the loss and on a tiny model', async () => {
    const r = await engine.request('gradcheck', { seed: 0 });
    expect(r.checks.filter((c) => !c.ok)).toEqual([]);
    expect(r.ok).toBe(true);
    const names = r.checks.map((c) => c.name);
    for (const v of ['token-mean', 'seq-mean-token-mean', 'dr-grpo', 'dual-clip', 'gspo', 'kl-k1', 'kl-k2', 'kl-k3']) {
      expect(names).toContain(`loss/${v}`);
    }
    expect(names.filter((n) => n.startsWith('model/')).length).toBeGreaterThanOrEqual(3);
  });
});
