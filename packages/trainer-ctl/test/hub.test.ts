/**
 * Hugging Face Hub download and push (issue 10, acceptance 4) against the project's local hub
 * server (testkit/hub-server.ts) with HF_ENDPOINT pointed at it: a real tiny model's files in
 * the hub's layout are downloaded into the cache byte for byte (the ONNX export, which a
 * backbone does not need, left out; the tiny model's weights are a PyTorch .bin, taken since
 * the repository has no safetensors); a weights file cut mid-download is resumed with a Range request;
 * a corrupted file fails with a checksum error and is fetched anew afterwards; gated and missing
 * repositories fail with a clear message; a complete local directory needs no hub; and
 * `trainer-ctl push` uploads a checkpoint (its weights through the LFS batch API) with a
 * model card carrying the run's evaluation table.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { downloadModel, hubAccess } from '../src/hub/index';
import { loadRunConfig } from '../src/config/index';
import { prepareInputs } from '../src/controller/index';
import { startLocalHub, type LocalHub } from '../../../testkit/hub-server';
import { NEZHA_DATASET, REPO_ROOT } from '../../../testkit/nezha';
import { createTinyModel, scratch } from './workers-fixtures';

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
      new RegExp(`model\\.safetensors: checksum mismatch: got \\d+ bytes with sha256 [0-9a-f]{64}, the hub lists \\d+ bytes with ${sha256(join(modelDir, 'model.safetensors'))}`),
    );
    expect(existsSync(join(out, 'model.safetensors'))).toBe(false);
    expect(existsSync(join(out, 'model.safetensors.part'))).toBe(false);
    hub.corrupt('model.safetensors', false);
    await downloadModel({ ...access(), hubId: REPO, revision: 'main', dir: out });
    expect(sha256(join(out, 'model.safetensors'))).toBe(sha256(join(modelDir, 'model.safetensors')));
  });

  it('names a gated repository (token missing or without access) and a missing one', async () => {
    const gated = (env: Record<string, string>) => downloadModel({ ...access(env), hubId: 'thinkfl-test/gated', revision: 'main', dir: join(dir, 'cache', 'g') });
    await expect(gated({})).rejects.toThrow(/model.hub_id thinkfl-test\/gated at revision main on http:\/\/127.0.0.1:\d+: access refused \(HTTP 401\); the repository is gated or private: accept its terms on the hub and set HF_TOKEN/);
    await expect(gated({ HF_TOKEN: 'hf_other' })).rejects.toThrow(/access refused \(HTTP 403\).*the HF_TOKEN given has none/);
    await expect(gated({ HF_TOKEN: TOKEN })).resolves.toEqual(['config.json']);
    await expect(downloadModel({ ...access(), hubId: 'thinkfl-test/nope', revision: 'main', dir: join(dir, 'cache', 'n') })).rejects.toThrow(
      /model.hub_id thinkfl-test\/nope at revision main on .*: no such repository or revision \(HTTP 404\)/,
    );
  });

  it('prepares a run from hub_id, and uses a complete local directory offline', async () => {
    const yaml = (cache: string) => {
      const file = join(dir, `run-${cache}.yaml`);
      writeFileSync(file, `run: { name: hub, output_dir: ${join(dir, 'runs')} }\nmodel: { hub_id: ${REPO}, cache_dir: ${join(dir, cache)} }\ndataset: { path: ${NEZHA_DATASET} }\n`);
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
function push(run: string, env: Record<string, string>): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs'), 'push', run, '--repo', 'thinkfl-test/pushed'], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
  });
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
        policyVersion: 2,
        cases: 8,
        formatValid: 0.875,
        answered: 0.75,
        summary: { levels: ['service'], perRequest: { service: { n: 8, recall: { 1: 0.25, 3: 0.5, 5: 0.625 }, mrr: 0.40625, found: 5 } } },
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
    // Hand-computed: 0.875 -> 87.5 %, recall@1 0.25 -> 25.0 %, recall@3 0.5 -> 50.0 %.
    expect(card).toContain('| evaluation | policy version | cases | format valid % | answered % | service AC@1 % | service AC@3 % | service MRR |');
    expect(card).toContain('| final | 2 | 8 | 87.5 | 75.0 | 25.0 | 50.0 | 0.406 |');
    const again = await push(run, { HF_ENDPOINT: hub.endpoint, HF_TOKEN: '' });
    expect(again.status).not.toBe(0);
    expect(again.stderr).toContain('push needs HF_TOKEN');
  }, 120_000);
});
