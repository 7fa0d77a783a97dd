/**
 * The presets in configs/: all valid, written in snake_case only, the backbone ones differing
 * only where the models differ and carrying the ThinkFL paper's settings; the committed JSON
 * Schema is the generated one.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { COMPOSITE_PRESETS, type CompositeSpec } from '@thinkfl/graders';
import { parse } from 'yaml';
import { describe, expect, it } from 'vitest';
import { loadRunConfig, runConfigJsonSchema, STAGE_NAMES, type RunConfig } from '../src/config';
import { NEZHA_DATASET, REPO_ROOT } from '../../../testkit/nezha';

const CONFIGS = join(REPO_ROOT, 'configs');
const BACKBONES = ['llama-3.2-3b', 'qwen2.5-3b', 'qwen2.5-0.5b', 'llama-3-8b'];

function load(name: string): RunConfig {
  // Input paths are checked where they exist here: hub models download later, the tiny model
  // is made by scripts/create-tiny-model.ts, so only the schema and the dataset path are asserted.
  return loadRunConfig(join(CONFIGS, `${name}.yaml`), { checkPaths: false }).config;
}

function weight(spec: string | CompositeSpec, grader: string): number {
  const s = typeof spec === 'string' ? COMPOSITE_PRESETS[spec] : spec;
  return s.terms.filter((t) => t.grader === grader).reduce((a, t) => a + t.weight, 0);
}

/** Every mapping key of a YAML document, as dotted paths. */
function keyPaths(v: unknown, at = ''): string[] {
  if (Array.isArray(v)) return v.flatMap((x, i) => keyPaths(x, `${at}${i}.`));
  if (v === null || typeof v !== 'object') return [];
  return Object.entries(v).flatMap(([k, x]) => [`${at}${k}`, ...keyPaths(x, `${at}${k}.`)]);
}

describe('presets', () => {
  it('writes every key in snake_case, and D_max once (episode.d_max)', () => {
    for (const f of readdirSync(CONFIGS).filter((n) => n.endsWith('.yaml'))) {
      const paths = keyPaths(parse(readFileSync(join(CONFIGS, f), 'utf8')));
      expect(paths.length).toBeGreaterThan(20);
      expect(
        paths.filter((p) => !/^[a-z0-9_]+$/.test(p.split('.').at(-1)!)),
        f,
      ).toEqual([]);
      expect(
        paths.filter((p) => p.endsWith('d_max')),
        f,
      ).toEqual(['episode.d_max']);
    }
  });

  it('has tiny-cpu, cpu-learn, ci-smoke and one preset per backbone, all valid', () => {
    const names = readdirSync(CONFIGS)
      .filter((f) => f.endsWith('.yaml'))
      .map((f) => f.replace(/\.yaml$/, ''))
      .sort();
    expect(names).toEqual([...BACKBONES, 'ci-smoke', 'cpu-learn', 'tiny-cpu'].sort());
    for (const n of names) expect(load(n).run.name).toBe(n);
  });

  it('points every preset at the imported Nezha dataset of the repository', () => {
    for (const n of [...BACKBONES, 'tiny-cpu', 'cpu-learn', 'ci-smoke']) expect(load(n).dataset.path).toBe(NEZHA_DATASET);
  });

  it('differs between backbones only where the models differ, each difference commented', () => {
    // The backbone's own lines: its identity, shape, context, adapter, GPUs and how training and serving split them.
    const own = /^ {2}((hub_id|max_context_tokens|architecture|lora|train):|# config\.json )|^ {4}replicas:|^resources:/;
    const body = (n: string) =>
      readFileSync(join(CONFIGS, `${n}.yaml`), 'utf8')
        .split('\n')
        .filter((l) => !l.startsWith('#') && !l.startsWith('  name: '));
    const base = body(BACKBONES[0]);
    for (const n of BACKBONES.slice(1)) {
      const other = body(n);
      expect(other).toHaveLength(base.length);
      const differing = other.filter((l, i) => l !== base[i]);
      expect(differing.length).toBeGreaterThan(0);
      for (const l of differing) expect(l, n).toMatch(own);
      for (const l of differing.filter((x) => !/^ {2}(hub_id|architecture|# config\.json)/.test(x))) expect(l, n).toMatch(/ # \S/);
    }
  });

  it('gives each backbone its own context length and LoRA adapter', () => {
    const c = Object.fromEntries(BACKBONES.map((n) => [n, load(n)]));
    expect(c['llama-3-8b'].model.max_context_tokens).toBe(8192);
    expect(c['qwen2.5-3b'].model.max_context_tokens).toBe(32768);
    expect(c['llama-3-8b'].model.lora!.target_modules).toEqual(['q_proj', 'k_proj', 'v_proj', 'o_proj']);
    expect(c['qwen2.5-0.5b'].model.lora!.r).toBeGreaterThan(c['llama-3-8b'].model.lora!.r);
    for (const n of BACKBONES) {
      expect(c[n].workers.train.deepspeed_config, n).toBe(join(REPO_ROOT, 'configs', 'deepspeed', 'zero2.json'));
      expect(c[n].resources, n).toBeDefined();
    }
  });

  it.each(BACKBONES)('%s carries the ThinkFL settings', (n) => {
    const c = load(n);
    expect(c.model.hub_id).toMatch(/\//);
    expect(c.episode.d_max).toBe(10);
    expect(c.graders.recall.r_max).toBe(10);
    expect(c.graders.multi_factor).toEqual({ alpha: 1, beta: 0.2, gamma: 0.2 });
    expect(c.generation.temperature.priming).toBeGreaterThan(c.generation.temperature.exploration);
    expect(c.generation.temperature.priming).toBeGreaterThan(c.generation.temperature.refinement);
    const stage2 = c.graders.stage_rewards.exploration;
    expect(weight(stage2, 'recall')).toBeGreaterThan(weight(stage2, 'diversity'));
    expect(weight(stage2, 'diversity')).toBeGreaterThan(0);
    expect(weight(c.graders.stage_rewards.refinement, 'multi_factor')).toBe(1);
    expect(c.grpo.group_size).toBe(8);
    expect(c.grpo.optimizer.lr).toBe(1e-6);
    expect(c.grpo.loss).toMatchObject({ kl_coef: 0.001, kl_estimator: 'k3', eps_low: 0.2, eps_high: 0.2 });
    const backend = c.generation.backend;
    expect(backend.kind).toBe('vllm');
    if (backend.kind === 'vllm') expect(backend.replicas.length).toBeGreaterThan(0);
  });

  it('keeps tiny-cpu small enough for 2 CPU cores', () => {
    const c = load('tiny-cpu');
    expect(c.model.hub_id).toBeUndefined();
    expect(c.model.dir).toBe(join(REPO_ROOT, '.cache', 'models', 'tiny'));
    expect(c.generation.backend.kind).toBe('onnx');
    expect(c.workers.train.device).toBe('cpu');
    expect(c.grpo.group_size).toBeLessThanOrEqual(4);
    for (const s of STAGE_NAMES) {
      expect(c.stages[s].enabled).toBe(true);
      expect(c.stages[s].steps).toBeLessThanOrEqual(12);
    }
    expect(c.queue.redis_url).toBeNull();
  });

  it('evaluates cpu-learn on every held-out case, the same ones in every run seed, with renamed teacher data', () => {
    const c = load('cpu-learn');
    expect(c.model.dir).toBe(join(REPO_ROOT, '.cache', 'models', 'tiny'));
    expect(c.workers.train.device).toBe('cpu');
    expect(c.dataset.split).toEqual({ by: 'fault', eval_fraction: 0.3, seed: 0 });
    expect(c.dataset.max_eval_cases).toBeUndefined();
    expect(c.dataset.max_cases_per_fault).toBeUndefined();
    expect(c.stages.priming.sft.rename.copies).toBeGreaterThan(1);
    for (const s of STAGE_NAMES) expect(c.stages[s].enabled).toBe(true);
  });
});

describe('JSON Schema', () => {
  it('is committed as configs/run.schema.json, in sync with the zod schema', () => {
    const committed = JSON.parse(readFileSync(join(CONFIGS, 'run.schema.json'), 'utf8'));
    expect(committed).toEqual(runConfigJsonSchema());
  });

  it('rejects unknown keys and documents the knobs', () => {
    const s = runConfigJsonSchema() as { additionalProperties: boolean; required: string[]; properties: Record<string, any> };
    expect(s.additionalProperties).toBe(false);
    expect(s.required).toEqual(expect.arrayContaining(['run', 'model', 'dataset']));
    const grpo = s.properties.grpo.properties;
    expect(grpo.group_size.default).toBe(8);
    expect(grpo.group_size.description).toMatch(/samples per case/);
    expect(grpo.advantage.properties.estimator.enum).toEqual(['grpo', 'drgrpo', 'rloo', 'thinkfl', 'softmax_centred']);
    expect(s.properties.queue.properties.redis_url.description).toMatch(/append-only/);
  });
});
