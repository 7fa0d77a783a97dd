/**
 * The `vllm` backend's failure handling against a real `trainer-ctl serve` replica and a replica
 * address where nothing listens: a policy directory whose manifest does not match is refused
 * naming the file; a replica that cannot load a version leaves rotation with a reason naming it
 * and the version, while the one that could serves every request under `<prefix>-v<N>`; no
 * replica able to load is an error naming each; a version outside the staleness window is
 * refused; stop token ids come from generation_config.json. Issue 25: a resumed run that writes
 * other weights into a version's directory while the replica still holds the first ones loads
 * them under a new name (run, version, manifest digest) and samples exactly what an in-process
 * onnx backend on the new weights samples; the same weights at another path are pointed there
 * with load_inplace; serve refuses a held name and runs without --enable-lora as vLLM 0.33 does.
 */
import { cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VllmBackend, stopTokenIds, verifyManifest, writeManifest } from '../src/backends/index';
import { loadChatModel } from '../src/chat/chat-model';
import { openLocalModel } from '../src/serve/index';
import { postJson, scratchDir, startServeProcess, type ServeProcess } from './backend-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';

const dir = scratchDir('vllm');
let modelDir: string;
let serve: ServeProcess;
let deadUrl: string;
const fast = { backoff_ms: 10, load_retries: 1, retries: 1, health_interval_ms: 60_000, request_timeout_s: 30, load_timeout_s: 30 };

/** A copy of the model as the trainer writes a version: the files, then manifest.json. */
async function policyVersion(v: number): Promise<string> {
  const out = join(dir, 'adapters', `v${v}`);
  cpSync(modelDir, out, { recursive: true });
  await writeManifest(out, v);
  return out;
}

beforeAll(async () => {
  modelDir = await createTinyModel(join(dir, 'base'), 7);
  serve = await startServeProcess(modelDir, ['--name', 'base', '--enable-lora']);
  // A port that was free a moment ago: connections to it are refused.
  const probe = createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  deadUrl = `http://127.0.0.1:${(probe.address() as { port: number }).port}/v1`;
  await new Promise<void>((r) => probe.close(() => r()));
}, 300_000);
afterAll(async () => {
  expect(await serve?.stop()).toBe(0);
});

describe('vllm backend', () => {
  it('refuses a policy directory that does not match its manifest, naming the file', async () => {
    const v = await policyVersion(9);
    await expect(verifyManifest(v, 9)).resolves.toBeDefined();
    await expect(verifyManifest(v, 8)).rejects.toThrow(/manifest.json: version 9, expected 8/);
    writeFileSync(join(v, 'tokenizer.json'), '{}');
    const backend = new VllmBackend({ replicas: [serve.url], lora_prefix: 'run', ...fast });
    await expect(backend.reload(v, 9)).rejects.toThrow(
      new RegExp(`${join(v, 'tokenizer.json').replace(/[/.]/g, '\\$&')}: \\d+ bytes, the manifest says \\d+`),
    );
    mkdirSync(join(v, 'extra'));
    writeFileSync(join(v, 'extra', 'x.bin'), 'x');
    await expect(verifyManifest(v, 9)).rejects.toThrow(/extra\/x\.bin is not in manifest.json/);
    await backend.close();
  });

  it('takes a replica that cannot load out of rotation and serves every request by name from the one that could', async () => {
    const backend = new VllmBackend({ replicas: [deadUrl, serve.url], lora_prefix: 'run-a', ...fast });
    await backend.reload(await policyVersion(0), 0);
    const [dead, live] = backend.replicas;
    expect(dead.ready).toBe(false);
    expect(dead.reason).toMatch(
      new RegExp(
        `loading policy version 0 \\(run-a-v0-[0-9a-f]{12} from .*v0\\) failed after 2 attempt\\(s\\): .*${deadUrl.replace(/[/.]/g, '\\$&')}`,
      ),
    );
    expect([live.ready, [...live.loaded]]).toEqual([true, [0]]);
    const models = ((await (await fetch(`${serve.url}/models`)).json()) as { data: { id: string }[] }).data.map((m) => m.id);
    expect(models).toEqual(['base', backend.modelName(0)]);
    expect(backend.modelName(0)).toMatch(/^run-a-v0-[0-9a-f]{12}$/);
    const chat = loadChatModel(modelDir);
    const gens = await backend.generate(
      [0, 1, 2].map((s) => ({ promptIds: chat.tokenizer.encode('search_traces'), sampling: { seed: s, max_tokens: 5 } })),
    );
    for (const g of gens) {
      expect(g.tokenIds.length).toBeGreaterThan(0);
      expect(g.logprobs).toHaveLength(g.tokenIds.length);
    }
    const metrics = await (await fetch(`${new URL(serve.url).origin}/metrics`)).text();
    expect(metrics).toContain(`thinkfl_model_generations_total{model="${backend.modelName(0)}"} 3`);
    expect(metrics).not.toContain('thinkfl_model_generations_total{model="base"}');
    // Version 1 replaces 0 (staleness 0): 0 is unloaded and refused from then on.
    const b0 = new VllmBackend({ replicas: [serve.url], lora_prefix: 'run-b', staleness: 0, ...fast });
    await b0.reload(await policyVersion(1), 1);
    await b0.reload(await policyVersion(2), 2);
    const after = ((await (await fetch(`${serve.url}/models`)).json()) as { data: { id: string }[] }).data.map((m) => m.id);
    expect(after).toContain(b0.modelName(2));
    expect(after.some((m) => m.startsWith('run-b-v1-'))).toBe(false);
    await expect(b0.generate([{ promptIds: [5, 6], policyVersion: 1, sampling: { max_tokens: 2 } }])).rejects.toThrow(
      /policy version 1 is not loaded \(newest 2, staleness window 0\)/,
    );
    await Promise.all([backend.close(), b0.close()]);
  });

  it('fails when no replica can load a version, naming each replica and the version', async () => {
    const backend = new VllmBackend({ replicas: [deadUrl], lora_prefix: 'run-c', ...fast });
    await expect(backend.reload(await policyVersion(3), 3)).rejects.toThrow(
      new RegExp(
        `policy version 3 \\(run-c-v3-[0-9a-f]{12} from .*\\) could not be loaded on any replica: ${deadUrl.replace(/[/.]/g, '\\$&')} out of rotation \\(loading policy version 3`,
      ),
    );
    await expect(backend.generate([{ promptIds: [1], sampling: { max_tokens: 1 } }])).rejects.toThrow(/no policy version is loaded yet/);
    await backend.close();
  });

  it('reads stop token ids from generation_config.json', () => {
    const d = join(dir, 'gen');
    mkdirSync(d);
    expect(stopTokenIds(d)).toEqual([]);
    writeFileSync(join(d, 'generation_config.json'), JSON.stringify({ eos_token_id: [151645, 151643] }));
    expect(stopTokenIds(d)).toEqual([151645, 151643]);
    writeFileSync(join(d, 'generation_config.json'), JSON.stringify({ eos_token_id: 2 }));
    expect(stopTokenIds(d)).toEqual([2]);
  });
});

describe('vllm backend against a replica that outlives runs', () => {
  const post = (path: string, body: unknown) => postJson(`${serve.url}${path}`, body);
  const cards = async () => ((await (await fetch(`${serve.url}/models`)).json()) as { data: { id: string; root: string }[] }).data;
  /** `src` copied to `out` as the trainer writes version v there. */
  const writeVersion = async (src: string, out: string, v: number) => {
    rmSync(out, { recursive: true, force: true });
    cpSync(src, out, { recursive: true });
    await writeManifest(out, v);
    return out;
  };

  it('samples the new weights of a version rewritten in place, under a new name, while the replica keeps the old', async () => {
    const other = await createTinyModel(join(dir, 'other'), 8);
    const path = join(dir, 'resume', 'v1');
    const first = new VllmBackend({ replicas: [serve.url], lora_prefix: 'res', ...fast });
    await first.reload(await writeVersion(modelDir, path, 1), 1);
    const stale = first.modelName(1);
    // The resumed run writes its own version 1, other weights, into the same directory.
    const resumed = new VllmBackend({ replicas: [serve.url], lora_prefix: 'res', ...fast });
    await resumed.reload(await writeVersion(other, path, 1), 1);
    const fresh = resumed.modelName(1);
    expect(fresh).not.toBe(stale);
    expect(stale).toMatch(/^res-v1-[0-9a-f]{12}$/);
    // Both listed from the same directory: the root alone could not tell them apart.
    const listed = await cards();
    expect(listed.find((c) => c.id === stale)?.root).toBe(path);
    expect(listed.find((c) => c.id === fresh)?.root).toBe(path);
    // What the replica samples for version 1 is what the new weights sample in process, token for token.
    const prompt = loadChatModel(modelDir).tokenizer.encode('ts-order-service search_traces');
    const sampling = { seed: 11, max_tokens: 12, temperature: 0.7 };
    const [got] = await resumed.generate([{ promptIds: prompt, sampling, policyVersion: 1 }]);
    const reference = async (d: string) => {
      const m = await openLocalModel(d, { threads: 1 });
      try {
        return (await m.backend.generate([{ promptIds: prompt, sampling }]))[0];
      } finally {
        await m.close();
      }
    };
    const [want, old] = [await reference(other), await reference(modelDir)];
    console.log(
      `[figure] resumed v1: replica ${got.tokenIds.join(' ')}; new weights in process ${want.tokenIds.join(' ')}; old weights ${old.tokenIds.join(' ')}`,
    );
    expect(got.tokenIds).toEqual(want.tokenIds);
    got.logprobs.forEach((lp, i) => expect(Math.abs(lp - want.logprobs[i])).toBeLessThan(1e-5));
    expect(old.logprobs.some((lp, i) => Math.abs(lp - got.logprobs[i]) > 1e-3) || old.tokenIds.join() !== got.tokenIds.join()).toBe(true);
    // The same weights from another path: the held name is pointed there (load_inplace), and the check of its root passes.
    const moved = await writeVersion(other, join(dir, 'moved', 'v1'), 1);
    const again = new VllmBackend({ replicas: [serve.url], lora_prefix: 'res', ...fast });
    await again.reload(moved, 1);
    expect(again.modelName(1)).toBe(fresh);
    expect((await cards()).find((c) => c.id === fresh)?.root).toBe(moved);
    // As vLLM 0.33: a held name is refused without load_inplace, and a base model's name is never an adapter's.
    expect(await post('/load_lora_adapter', { lora_name: fresh, lora_path: moved })).toEqual({
      status: 400,
      text: expect.stringContaining(
        `The lora adapter '${fresh}' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.`,
      ),
    });
    expect((await post('/load_lora_adapter', { lora_name: 'base', lora_path: moved, load_inplace: true })).status).toBe(400);
    await Promise.all([first.close(), resumed.close(), again.close()]);
  }, 300_000);

  it("without --enable-lora, serve answers a load with vLLM's 500", async () => {
    const plain = await startServeProcess(modelDir, ['--name', 'base']);
    try {
      const r = await fetch(`${plain.url}/load_lora_adapter`, {
        method: 'POST',
        body: JSON.stringify({ lora_name: 'x', lora_path: modelDir }),
      });
      expect(r.status).toBe(500);
      expect(((await r.json()) as { error: { message: string } }).error.message).toBe(
        'LoRA is not enabled. Use --enable-lora to enable LoRA.',
      );
    } finally {
      expect(await plain.stop()).toBe(0);
    }
  }, 120_000);
});
