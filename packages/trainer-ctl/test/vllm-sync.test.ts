/**
 * The `vllm` backend's weight sync over HTTP, end to end on CPU (issue 10, acceptance 1 and 2):
 * GRPO steps of a LoRA policy (model.lora on the tiny Llama) run by the controller's step
 * function over a real Redis, a real train worker writing each policy into <run>/adapters/v<N>
 * with its manifest (the PEFT adapter that vLLM's load_lora_adapter reads, and the merged ONNX
 * export beside it in merged/, which serve loads for the same lora_path), a `trainer-ctl worker
 * rollout` process with `generation.backend.kind: vllm`, and two `trainer-ctl serve`
 * replicas loading every version through POST /v1/load_lora_adapter. Stage 1 starts with SFT,
 * so the first version the replicas load is the SFT adapter (v1). Every trajectory records
 * the version its step asked for, and the replicas' own per-model counters (independent of the
 * worker) show exactly that many generations by that version's adapter, loaded from that
 * version's directory, and none by the base model. Then one replica is SIGKILLed mid-step and
 * restarted on its port: the step still ends with exactly G samples per group, and the
 * restarted replica holds the current adapter before it answers any generation.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDataset, type Dataset } from '@thinkfl/env';
import { manifestDigest, MANIFEST_FILE, verifyManifest, type Manifest } from '@thinkfl/rollout';
import type { LoadedRunConfig } from '../src/config/index';
import { runGrpoStep, type RedisTransport, type StepContext, type StepOutcome } from '../src/controller/index';
import { parseQueueSettings, PolicyRegistry, type Trajectory } from '../src/queue/index';
import type { TrainWorker } from '../src/workers/index';
import { readSafetensors } from '../../../testkit/safetensors';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { readMetrics, startServe, type ServeProcess } from './serve-fixtures';
import { closeGround, openGround, startTrainer, type WorkerGround, type WorkerProcess } from './workers-fixtures';
import { generationCount, generationsOn, modelCards, sftUpdate, startRolloutSide, stopRunSides, writeLoraRunConfig } from './vllm-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';

const RUN = 'vllm-sync';
const G = 4;
let ground: WorkerGround;
let dataset: Dataset;
let loaded: LoadedRunConfig;
let trainer: TrainWorker;
let rollout: WorkerProcess;
let transport: RedisTransport;
let ctx: StepContext;
let modelDir: string;
const replicas: ServeProcess[] = [];
/** lora_B of version 0's adapter. */
let baseB: Buffer;

const names = new Map<number, string>();
/** The name the backend serves version v under: run, version and the digest of its manifest (read once, while the directory is there). */
const name = (v: number): string => {
  if (!names.has(v))
    names.set(v, `${RUN}-v${v}-${manifestDigest(JSON.parse(readFileSync(join(versionDir(v), MANIFEST_FILE), 'utf8')) as Manifest)}`);
  return names.get(v)!;
};
const listed = async (r: ServeProcess) => (await modelCards(r)).map((m) => m.id);
const versionDir = (v: number) => join(loaded.runDir, 'adapters', `v${v}`);

/** The lora_B matrices of a version's adapter, concatenated (B starts at 0: zero means the base model). */
const loraB = (v: number) =>
  Buffer.concat(
    [...readSafetensors(join(versionDir(v), 'adapter_model.safetensors'))].filter(([k]) => k.includes('lora_B')).map(([, t]) => t.data),
  );

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined) return v;
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  ground = await openGround('vllm');
  dataset = await loadDataset(await ensureNezhaDataset());
  modelDir = await createTinyModel(join(ground.dir, 'model'), 5);
  for (let i = 0; i < 2; i++) replicas.push(await startServe(modelDir, ['--name', 'base', '--threads', '1', '--enable-lora']));
  const file = join(ground.dir, 'run.yaml');
  loaded = writeLoraRunConfig(
    ground,
    file,
    RUN,
    modelDir,
    `generation:
  backend: { kind: vllm, replicas: [${replicas.map((r) => r.url).join(', ')}], backoff_ms: 100, health_interval_ms: 200, request_timeout_s: 60, load_timeout_s: 60 }
  sampling: { max_tokens: 48 }
grpo: { group_size: ${G}, cases_per_step: 2, max_refill_groups: 0, advantage: { skip_equal_groups: false }, loss: { kl_coef: 0 }, optimizer: { lr: 1.0e-3, reset: never } }   # SFT's moments carry on: every update moves the adapter even when a step's rewards are all equal (versions are compared below)
workers: { rollout: { concurrency: 4 }, sync_timeout_s: 120, max_staleness: 0 }
`,
  );
  const settings = parseQueueSettings({ prefix: 'thinkfl' });
  trainer = await startTrainer(ground.conn, RUN, settings, loaded);
  // Stage 1 starts with SFT (ThinkFL's format-aware priming): update 0 trains the adapter on
  // scripted-expert conversations, so the GRPO steps play an adapter that is not the base model.
  await sftUpdate(ground, RUN, settings, { dataset, modelDir }, { update: 0, firstCase: 0, checkpoint: false });
  // Read before the trainer prunes it (versions behind the staleness window go).
  baseB = loraB(0);
  ({ rollout, transport, ctx } = await startRolloutSide(ground, file, loaded, dataset));
}, 900_000);

afterAll(async () => {
  await stopRunSides(rollout, transport, trainer);
  for (const r of replicas) await r.stop();
  await closeGround(ground);
});

/** Each group has exactly G samples, one per index, all recording `version`. */
function expectGroups(out: StepOutcome, version: number): Trajectory[] {
  const all: Trajectory[] = [];
  expect(out.groups).toHaveLength(2);
  for (const g of out.groups) {
    expect(g.trajectories.map((t) => t.sample_index)).toEqual([...Array(G).keys()]);
    for (const t of g.trajectories) expect(t.policy_version).toBe(version);
    all.push(...g.trajectories);
  }
  return all;
}

describe('vllm backend against two trainer-ctl serve replicas', () => {
  it('runs GRPO steps with every version synced as an adapter: trajectories record the adapter that generated them', async () => {
    // GRPO step s plays version s + 1 (v1: the SFT adapter) and makes update s + 1.
    for (let step = 0; step < 2; step++) {
      const version = step + 1;
      const before = await Promise.all(replicas.map((r) => readMetrics(r.origin)));
      const out = await runGrpoStep(ctx, { stage: 'priming', step, update: version, policyVersion: version, checkpoint: false });
      expect(out.result?.version).toBe(version + 1);
      const trajectories = expectGroups(out, version);
      const turns = generationCount(trajectories);
      const served = await Promise.all(replicas.map((r) => generationsOn(r, name(version))));
      const earlier = before.map((m) => m[`thinkfl_model_generations_total{model="${name(version)}"}`] ?? 0);
      // The replicas generated exactly the trajectories' turns with this step's adapter, both of them taking part.
      console.log(
        `[figure] step ${step}: ${trajectories.length} trajectories, ${turns} generations; ${name(version)} on replica 0: ${served[0] - earlier[0]}, replica 1: ${served[1] - earlier[1]}`,
      );
      expect(served[0] - earlier[0] + served[1] - earlier[1]).toBe(turns);
      expect(served.every((n, i) => n - earlier[i] > 0)).toBe(true);
      for (const r of replicas) expect(await generationsOn(r, 'base')).toBe(0);
      // Each replica served this version's adapter from this version's directory.
      for (const r of replicas) expect((await modelCards(r)).find((c) => c.id === name(version))?.root).toBe(versionDir(version));
    }
    // Each version directory is a real PEFT adapter (what vLLM loads) with the merged ONNX export
    // beside it (what serve loaded): LoRA tensors only, q_proj and v_proj in both layers.
    for (const v of [1, 2, 3]) {
      const adapter = readSafetensors(join(versionDir(v), 'adapter_model.safetensors'));
      expect([...adapter.keys()].every((k) => /\.(q_proj|v_proj)\.lora_[AB]\.weight$/.test(k))).toBe(true);
      expect(adapter.size).toBe(2 * 2 * 2);
      expect(JSON.parse(readFileSync(join(versionDir(v), 'adapter_config.json'), 'utf8'))).toMatchObject({
        peft_type: 'LORA',
        r: 4,
        lora_alpha: 8,
      });
      expect(existsSync(join(versionDir(v), 'config.json'))).toBe(false);
      expect(existsSync(join(versionDir(v), 'merged', 'onnx', 'model.onnx'))).toBe(true);
    }
    // v0 is the base (B = 0); each update moved the adapter.
    expect(baseB.every((b) => b === 0)).toBe(true);
    expect(loraB(1).some((b) => b !== 0)).toBe(true);
    expect(loraB(2).equals(loraB(1))).toBe(false);
    expect(loraB(3).equals(loraB(2))).toBe(false);
    // The trainer wrote each version atomically with its manifest.
    for (const v of [1, 2, 3]) {
      expect(existsSync(join(versionDir(v), MANIFEST_FILE))).toBe(true);
      const manifest = await verifyManifest(versionDir(v), v);
      expect(Object.keys(manifest.files)).toEqual(
        expect.arrayContaining(['adapter_config.json', 'adapter_model.safetensors', 'merged/onnx/model.onnx']),
      );
    }
    expect(await new PolicyRegistry(ground.conn, RUN).current()).toEqual({ version: 3, dir: versionDir(3) });
    // With no staleness allowed, older versions are unloaded once their requests finished.
    await until('v1 unloaded', async () =>
      (await Promise.all(replicas.map(listed))).every((l) => l.join() === ['base', name(2)].join()) ? true : undefined,
    );
  }, 900_000);

  it('survives a replica killed mid-step and restarted: exactly G samples per group, the current adapter loaded before it takes jobs', async () => {
    const step = 2;
    const version = step + 1;
    const running = runGrpoStep(ctx, { stage: 'priming', step, update: version, policyVersion: version, checkpoint: false });
    // Kill replica 0 once it has generated with this version: mid-step.
    const victim = replicas[0];
    const port = Number(new URL(victim.url).port);
    await until(
      `replica 0 generating v${version}`,
      async () => ((await generationsOn(victim, name(version))) > 0 ? true : undefined),
      300_000,
    );
    victim.child.kill('SIGKILL');
    await victim.stop();
    const restarted = await startServe(modelDir, ['--name', 'base', '--threads', '1', '--enable-lora'], port);
    replicas[0] = restarted;
    const out = await running;
    expectGroups(out, version);
    expect(out.result?.version).toBe(version + 1);
    // The restarted replica was given the current adapter by the backend before any generation reached it.
    const current = [name(version), name(version + 1)];
    await until('restarted replica synced', async () => ((await listed(restarted)).some((id) => current.includes(id)) ? true : undefined));
    const m = await readMetrics(restarted.origin);
    console.log(
      `[figure] step ${step} with replica 0 killed and restarted: restarted replica served ${JSON.stringify(m)}; replica 1 served ${await generationsOn(replicas[1], name(version))} ${name(version)} generations`,
    );
    const models = Object.keys(m).filter((k) => k.startsWith('thinkfl_model_generations_total'));
    expect(models.every((k) => current.some((id) => k.includes(`"${id}"`)))).toBe(true);
    expect(await generationsOn(restarted, 'base')).toBe(0);
    expect(await generationsOn(replicas[1], 'base')).toBe(0);
    expect(rollout.lines.some((l) => l.includes(`out of rotation`) && l.includes(victim.url))).toBe(true);
    await rollout.waitLine(new RegExp(`${victim.url.replace(/[/.]/g, '\\$&')} back in rotation with ${name(version)}`));
    const manifest = JSON.parse(readFileSync(join(versionDir(version + 1), MANIFEST_FILE), 'utf8')) as { version: number };
    expect(manifest.version).toBe(version + 1);
  }, 900_000);
});
