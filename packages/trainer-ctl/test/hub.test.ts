/**
 * Hugging Face Hub download and push (issue 10, acceptance 4) against the project's local hub
 * server (testkit/hub-server.ts) with HF_ENDPOINT pointed at it: a real tiny model's files in
 * the hub's layout are downloaded into the cache byte for byte (the ONNX export, which a
 * backbone does not need, left out; the tiny model's weights are a PyTorch .bin, taken since
 * the repository has no safetensors); a weights file cut mid-download is resumed with a Range request;
 * a corrupted file fails with a checksum error and is fetched anew afterwards; gated and missing
 * repositories fail with a clear message; a complete local directory needs no hub; and
 * `trainer-ctl push` uploads a checkpoint (its weights through the LFS batch API) with a
 * model card carrying the run's evaluation table. Issue 25, acceptance 3: a LoRA run's
 * checkpoint, written by the real train engine after GRPO steps with a KL reference, goes up as
 * the adapter alone (no optimizer, reference or trainer state) with base_model_name_or_path and
 * the card naming the base's hub id and library_name peft; a 3 GiB weights file (sparse) goes up
 * in the hub's multipart parts, byte for byte by the SHA-256 sha256sum computes, while the push
 * process's peak resident memory stays far below the file's size.
 */
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { downloadModel, hubAccess } from '../src/hub/index';
import { TrainEngine } from '../src/engine/index';
import { loadRunConfig } from '../src/config/index';
import { prepareInputs } from '../src/controller/index';
import { startLocalHub, type LocalHub } from '../../../testkit/hub-server';
import { NEZHA_DATASET, REPO_ROOT } from '../../../testkit/nezha';
import { scratch } from './workers-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';

const REPO = 'thinkfl-test/tiny';
const TOKEN = 'hf_testtoken';
let hub: LocalHub;
let dir: string;
let modelDir: string;
const sha256 = (f: string) => createHash('sha256').update(readFileSync(f)).digest('hex');

function filesOf(root: string): string[] {
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(root, join(e.parentPath, e.name)))
    .sort();
}

beforeAll(async () => {
  hub = await startLocalHub();
  dir = scratch('hub');
  modelDir = await createTinyModel(join(dir, 'model'), 6);
  hub.repos.set(REPO, { files: new Map(filesOf(modelDir).map((f) => [f, readFileSync(join(modelDir, f))])) });
  hub.repos.set('thinkfl-test/gated', { files: new Map([['config.json', Buffer.from('{}')]]), gatedFor: [TOKEN] });
}, 300_000);
afterAll(async () => {
  await hub?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const access = (env: Record<string, string> = {}) => hubAccess({ HF_ENDPOINT: hub.endpoint, ...env });

describe('hub download', () => {
  it('honours HF_ENDPOINT and HF_TOKEN', () => {
    expect(hubAccess({ HF_ENDPOINT: 'http://127.0.0.1:9/', HF_TOKEN: 'hf_x' })).toEqual({ endpoint: 'http://127.0.0.1:9', token: 'hf_x' });
    expect(hubAccess({})).toEqual({ endpoint: 'https://huggingface.co' });
  });

  it('downloads config, tokenizer and weights into the cache, byte for byte, and nothing a backbone does not need', async () => {
    const out = join(dir, 'cache', 'a');
    const got = await downloadModel({ ...access(), hubId: REPO, revision: 'main', dir: out });
    expect(got.sort()).toEqual(['config.json', 'generation_config.json', 'model.safetensors', 'tokenizer.json', 'tokenizer_config.json']);
    expect(filesOf(modelDir)).toContain('onnx/model.onnx');
    expect(filesOf(out)).toEqual(got.sort());
    for (const f of got) expect(sha256(join(out, f)), f).toBe(sha256(join(modelDir, f)));
    // A second call finds everything in place and fetches nothing.
    const before = hub.ranges.get('model.safetensors')!.length;
    await downloadModel({ ...access(), hubId: REPO, revision: 'main', dir: out });
    expect(hub.ranges.get('model.safetensors')!.length).toBe(before);
  });

  it('resumes a shard cut mid-download with a Range request', async () => {
    const out = join(dir, 'cache', 'b');
    const size = statSync(join(modelDir, 'model.safetensors')).size;
    const cut = Math.floor(size / 3);
    hub.cutOnce('model.safetensors', cut);
    hub.ranges.set('model.safetensors', []);
    await expect(downloadModel({ ...access(), hubId: REPO, revision: 'main', dir: out })).rejects.toThrow();
    const partial = statSync(join(out, 'model.safetensors.part')).size;
    expect(partial).toBeGreaterThan(0);
    expect(partial).toBeLessThan(size);
    await downloadModel({ ...access(), hubId: REPO, revision: 'main', dir: out });
    expect(hub.ranges.get('model.safetensors')).toEqual(['', `bytes=${partial}-`]);
    expect(sha256(join(out, 'model.safetensors'))).toBe(sha256(join(modelDir, 'model.safetensors')));
    expect(existsSync(join(out, 'model.safetensors.part'))).toBe(false);
  });

  it('refuses a file whose checksum does not match, removes it, and downloads it anew next time', async () => {
    const out = join(dir, 'cache', 'c');
    hub.corrupt('model.safetensors', true);
    await expect(downloadModel({ ...access(), hubId: REPO, revision: 'main', dir: out })).rejects.toThrow(
      new RegExp(
        `model\\.safetensors: checksum mismatch: got \\d+ bytes with sha256 [0-9a-f]{64}, the hub lists \\d+ bytes with ${sha256(join(modelDir, 'model.safetensors'))}`,
      ),
    );
    expect(existsSync(join(out, 'model.safetensors'))).toBe(false);
    expect(existsSync(join(out, 'model.safetensors.part'))).toBe(false);
    hub.corrupt('model.safetensors', false);
    await downloadModel({ ...access(), hubId: REPO, revision: 'main', dir: out });
    expect(sha256(join(out, 'model.safetensors'))).toBe(sha256(join(modelDir, 'model.safetensors')));
  });

  it('names a gated repository (token missing or without access) and a missing one', async () => {
    const gated = (env: Record<string, string>) =>
      downloadModel({ ...access(env), hubId: 'thinkfl-test/gated', revision: 'main', dir: join(dir, 'cache', 'g') });
    await expect(gated({})).rejects.toThrow(
      /model.hub_id thinkfl-test\/gated at revision main on http:\/\/127.0.0.1:\d+: access refused \(HTTP 401\); the repository is gated or private: accept its terms on the hub and set HF_TOKEN/,
    );
    await expect(gated({ HF_TOKEN: 'hf_other' })).rejects.toThrow(/access refused \(HTTP 403\).*the HF_TOKEN given has none/);
    await expect(gated({ HF_TOKEN: TOKEN })).resolves.toEqual(['config.json']);
    await expect(
      downloadModel({ ...access(), hubId: 'thinkfl-test/nope', revision: 'main', dir: join(dir, 'cache', 'n') }),
    ).rejects.toThrow(/model.hub_id thinkfl-test\/nope at revision main on .*: no such repository or revision \(HTTP 404\)/);
  });

  it('prepares a run from hub_id, and uses a complete local directory offline', async () => {
    const yaml = (cache: string) => {
      const file = join(dir, `run-${cache}.yaml`);
      writeFileSync(
        file,
        `run: { name: hub, output_dir: ${join(dir, 'runs')} }\nmodel: { hub_id: ${REPO}, cache_dir: ${join(dir, cache)} }\ndataset: { path: ${NEZHA_DATASET} }\n`,
      );
      return loadRunConfig(file, { checkPaths: false }).config;
    };
    const env = { ...process.env };
    try {
      process.env.HF_ENDPOINT = hub.endpoint;
      const config = yaml('prep');
      await prepareInputs(config, () => undefined);
      expect(sha256(join(config.model.dir, 'model.safetensors'))).toBe(sha256(join(modelDir, 'model.safetensors')));
      // Offline: nothing listens on port 9.
      process.env.HF_ENDPOINT = 'http://127.0.0.1:9';
      await expect(prepareInputs(config, () => undefined)).resolves.toBeUndefined();
    } finally {
      process.env.HF_ENDPOINT = env.HF_ENDPOINT;
      if (env.HF_ENDPOINT === undefined) delete process.env.HF_ENDPOINT;
    }
  });
});

/** `trainer-ctl push` as a child process; asynchronous, since the hub server answers from this process. */
function push(
  run: string,
  env: Record<string, string>,
  repo = 'thinkfl-test/pushed',
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(
    process.execPath,
    [join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs'), 'push', run, '--repo', repo],
    {
      cwd: REPO_ROOT,
      env: { ...process.env, ...env },
    },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (b) => (stdout += b));
  child.stderr.on('data', (b) => (stderr += b));
  return new Promise((resolve) => child.once('exit', (status) => resolve({ status, stdout, stderr })));
}

describe('trainer-ctl push', () => {
  it('uploads the newest checkpoint with a model card carrying the evaluation table', async () => {
    const run = join(dir, 'run');
    const ckpt = join(run, 'checkpoints', 'update-000002');
    mkdirSync(join(run, 'checkpoints', 'update-000001'), { recursive: true });
    mkdirSync(ckpt, { recursive: true });
    for (const f of ['config.json', 'model.safetensors', 'tokenizer.json']) writeFileSync(join(ckpt, f), readFileSync(join(modelDir, f)));
    writeFileSync(
      join(run, 'eval-final.json'),
      JSON.stringify({
        name: 'final',
        policy_version: 2,
        cases: 8,
        format_valid: 0.875,
        answered: 0.75,
        summary: { levels: ['service'], per_request: { service: { n: 8, recall: { 1: 0.25, 3: 0.5, 5: 0.625 }, mrr: 0.40625, found: 5 } } },
      }),
    );
    const r = await push(run, { HF_ENDPOINT: hub.endpoint, HF_TOKEN: TOKEN });
    expect(r.stderr).toContain('push: created thinkfl-test/pushed');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^pushed 4 files to thinkfl-test\/pushed at [0-9a-f]+/);
    const pushed = hub.repos.get('thinkfl-test/pushed')!.files;
    expect([...pushed.keys()].sort()).toEqual(['README.md', 'config.json', 'model.safetensors', 'tokenizer.json']);
    expect(createHash('sha256').update(pushed.get('model.safetensors')!).digest('hex')).toBe(sha256(join(modelDir, 'model.safetensors')));
    const card = pushed.get('README.md')!.toString();
    expect(card).toContain('checkpoints/update-000002');
    expect(card).toMatch(/^---\nlibrary_name: transformers\n/);
    // Hand-computed: 0.875 -> 87.5 %, recall@1 0.25 -> 25.0 %, recall@3 0.5 -> 50.0 %.
    expect(card).toContain(
      '| evaluation | policy version | cases | format valid % | answered % | service AC@1 % | service AC@3 % | service MRR |',
    );
    expect(card).toContain('| final | 2 | 8 | 87.5 | 75.0 | 25.0 | 50.0 | 0.406 |');
    const again = await push(run, { HF_ENDPOINT: hub.endpoint, HF_TOKEN: '' });
    expect(again.status).not.toBe(0);
    expect(again.stderr).toContain('push needs HF_TOKEN');
  }, 120_000);
});

describe('trainer-ctl push of a LoRA run', () => {
  it('uploads the adapter alone, its config and card naming the base by hub id, from a checkpoint the engine wrote', async () => {
    const run = join(dir, 'lora-run');
    const ckpt = join(run, 'checkpoints', 'update-000002');
    const engine = new TrainEngine();
    try {
      await engine.request('load', {
        model_dir: modelDir,
        seed: 0,
        lora: { r: 4, alpha: 8, target_modules: ['q_proj', 'v_proj'] },
        optimizer: { lr: 1e-2 },
      });
      await engine.request('set_reference', { tag: 'grpo_start' });
      const ids = [[1, 5, 9, 13, 17, 21]];
      await engine.request('grpo_step', { input_ids: ids, mask: [[0, 0, 1, 1, 1, 1]], advantages: [1], loss: { kl_coef: 0.1 } });
      await engine.request('save', { dir: ckpt });
    } finally {
      await engine.shutdown();
    }
    // What the engine put in the checkpoint beside the adapter, none of which is the policy.
    const written = filesOf(ckpt);
    expect(written).toEqual(
      expect.arrayContaining([
        'adapter_config.json',
        'adapter_model.safetensors',
        'optimizer.pt',
        'reference/reference.pt',
        'tokenizer.json',
      ]),
    );
    expect(JSON.parse(readFileSync(join(ckpt, 'adapter_config.json'), 'utf8')).base_model_name_or_path).toBe(modelDir);
    // Without a hub id for the base the adapter would name a local path: refused.
    const refused = await push(run, { HF_ENDPOINT: hub.endpoint, HF_TOKEN: TOKEN }, 'thinkfl-test/lora');
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toContain('is a LoRA adapter: its base must be named by hub id');
    // trainer-ctl train keeps the run's config.yaml in the run directory: model.hub_id names the base.
    writeFileSync(join(run, 'config.yaml'), `model: { hub_id: ${REPO} }\n`);
    const r = await push(run, { HF_ENDPOINT: hub.endpoint, HF_TOKEN: TOKEN }, 'thinkfl-test/lora');
    expect(r.stderr).toContain('push: created thinkfl-test/lora');
    expect(r.status).toBe(0);
    const pushed = hub.repos.get('thinkfl-test/lora')!.files;
    console.log(
      `[figure] LoRA checkpoint: ${written.length} files written by the engine (${written.join(', ')}); pushed ${[...pushed.keys()].sort().join(', ')}`,
    );
    expect([...pushed.keys()].sort()).toEqual(['README.md', 'adapter_config.json', 'adapter_model.safetensors']);
    expect(createHash('sha256').update(pushed.get('adapter_model.safetensors')!).digest('hex')).toBe(
      sha256(join(ckpt, 'adapter_model.safetensors')),
    );
    const config = JSON.parse(pushed.get('adapter_config.json')!.toString());
    const original = JSON.parse(readFileSync(join(ckpt, 'adapter_config.json'), 'utf8'));
    expect(config).toEqual({ ...original, base_model_name_or_path: REPO });
    const card = pushed.get('README.md')!.toString();
    expect(card).toMatch(
      new RegExp(
        `^---\\nlibrary_name: peft\\ntags: \\[thinkfl, grpo, root-cause-analysis, lora\\]\\nbase_model: ${REPO.replace('/', '\\/')}\\n---\\n`,
      ),
    );
    expect(card).toContain('checkpoints/update-000002');
  }, 300_000);

  it("streams a 3 GiB weights file in the hub's multipart parts without reading it whole", async () => {
    const GIB = 1024 ** 3;
    const big = await startLocalHub({ partBytes: 700 * 1024 * 1024 });
    try {
      const run = join(dir, 'big-run');
      const ckpt = join(run, 'checkpoints', 'update-000001');
      mkdirSync(ckpt, { recursive: true });
      writeFileSync(join(ckpt, 'config.json'), readFileSync(join(modelDir, 'config.json')));
      // A sparse file: 3 GiB of zeros that take no disk.
      execFileSync('truncate', ['-s', String(3 * GIB), join(ckpt, 'model.safetensors')]);
      const reference = execFileSync('sha256sum', [join(ckpt, 'model.safetensors')])
        .toString()
        .split(' ')[0];
      // The push process records its peak resident memory as it exits.
      const rssFile = join(dir, 'push-rss.txt');
      const preload = join(dir, 'rss.cjs');
      writeFileSync(
        preload,
        `process.on('exit', () => require('node:fs').writeFileSync(${JSON.stringify(rssFile)}, String(process.resourceUsage().maxRSS * 1024)));\n`,
      );
      const r = await push(
        run,
        { HF_ENDPOINT: big.endpoint, HF_TOKEN: TOKEN, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --require ${preload}` },
        'thinkfl-test/big',
      );
      expect(r.stderr).toContain('push: created thinkfl-test/big');
      expect(r.status).toBe(0);
      const stored = big.repos.get('thinkfl-test/big')!.lfs!.get('model.safetensors');
      const rss = Number(readFileSync(rssFile, 'utf8'));
      console.log(
        `[figure] 3 GiB push: stored ${stored?.size} bytes, sha256 ${stored?.oid} (sha256sum ${reference}), in ${Math.ceil((3 * GIB) / (700 * 1024 * 1024))} parts of 700 MiB; push peak RSS ${(rss / 1024 ** 2).toFixed(0)} MiB`,
      );
      expect(stored).toEqual({ oid: reference, size: 3 * GIB });
      expect(rss).toBeLessThan(GIB / 2);
    } finally {
      await big.close();
    }
  }, 600_000);
});
