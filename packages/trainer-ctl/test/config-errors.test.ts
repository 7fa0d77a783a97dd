/**
 * A bad run config fails before any work, with messages naming file, line and YAML path:
 * wrong types, unknown keys (at any depth, including other packages' sections), missing
 * sections, and input paths (the dataset, the model) that do not exist.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConfigError, loadRunConfig, parseRunConfig } from '../src/config';
import { NEZHA_DATASET } from '../../../testkit/nezha';

const tmp = mkdtempSync(join(tmpdir(), 'thinkfl-config-'));
const modelDir = join(tmp, 'model');
mkdirSync(modelDir);
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** A valid config on the real imported Nezha dataset; `extra` lines are appended. */
function yaml(extra = '', dataset = NEZHA_DATASET): string {
  return [
    'run:',
    '  name: t1',
    `  output_dir: ${join(tmp, 'runs')}`,
    'model:',
    `  dir: ${modelDir}`,
    'dataset:',
    `  path: ${dataset}`,
    extra,
  ].join('\n');
}

function issuesOf(text: string): string[] {
  try {
    parseRunConfig(text, 'bad.yaml');
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as ConfigError).message.split('\n');
  }
  throw new Error('expected the config to be rejected');
}

describe('a valid config', () => {
  it('loads with defaults applied and absolute paths', () => {
    const { config, runDir } = parseRunConfig(yaml(), join(tmp, 'ok.yaml'));
    expect(config.grpo.group_size).toBe(8);
    expect(config.grpo.advantage.estimator).toBe('grpo');
    expect(config.episode.protocol).toBe('rot');
    expect(config.graders.stage_rewards.exploration).toBe('stage2');
    expect(config.dataset.path).toBe(NEZHA_DATASET);
    expect(runDir).toBe(join(tmp, 'runs', 't1'));
    // Loading does no work: not even the run directory is created.
    expect(existsSync(runDir)).toBe(false);
  });

  it('resolves relative paths against base_dir, relative to the YAML file', () => {
    const text = ['run: { name: r, base_dir: .. }', 'model: { hub_id: Qwen/Qwen2.5-0.5B-Instruct }', 'dataset: { path: data/x }'].join(
      '\n',
    );
    const { config } = parseRunConfig(text, join(tmp, 'configs', 'r.yaml'), { checkPaths: false });
    expect(config.dataset.path).toBe(join(tmp, 'data', 'x'));
    expect(config.model.dir).toBe(join(tmp, '.cache', 'models', 'Qwen--Qwen2.5-0.5B-Instruct'));
    expect(config.run.output_dir).toBe(join(tmp, 'runs'));
  });
});

describe('wrong types', () => {
  it('names file, line, YAML path, the expected type and the value found', () => {
    expect(issuesOf(yaml('grpo:\n  group_size: eight'))).toEqual(['bad.yaml:9: grpo.group_size: expected number, got string "eight"']);
  });

  it('names the accepted values of an enum', () => {
    expect(issuesOf(yaml('grpo:\n  advantage:\n    estimator: ppo'))).toEqual([
      'bad.yaml:10: grpo.advantage.estimator: expected one of "grpo", "drgrpo", "rloo", "thinkfl", "softmax_centred", got string "ppo"',
    ]);
  });

  it('refuses teacher answers drawn at random without answers by span, naming the key', () => {
    expect(issuesOf(yaml('stages:\n  priming:\n    sft:\n      answer_choice: random'))).toEqual([
      'bad.yaml:11: stages.priming.sft.answer_choice: answer_choice random draws spans: it needs answer_spans: true',
    ]);
  });

  it('refuses the GSPO sequence ratio with a token-level aggregation, naming the key', () => {
    const [msg] = issuesOf(yaml('grpo:\n  loss: { ratio_level: sequence, aggregation: token-mean }'));
    expect(msg).toMatch(
      /^bad\.yaml:\d+: grpo\.loss\.ratio_level: ratio_level sequence \(GSPO\) averages per sequence: it needs aggregation seq-mean-token-mean/,
    );
  });

  it('names the backend kinds when the kind is unknown', () => {
    expect(issuesOf(yaml('generation:\n  backend: { kind: sglang }'))).toEqual([
      'bad.yaml:9: generation.backend.kind: expected one of "onnx", "openai", "vllm", got string "sglang"',
    ]);
  });

  it('reports a range violation with the value', () => {
    expect(issuesOf(yaml('episode:\n  d_max: 50'))).toEqual([
      'bad.yaml:9: episode.d_max: Too big: expected number to be <=20, got number 50',
    ]);
  });
});

describe('unknown keys', () => {
  it('rejects a misspelt key with the line of the key and a suggestion', () => {
    const [msg] = issuesOf(yaml('grpo:\n  group_sise: 4'));
    expect(msg).toMatch(/^bad\.yaml:9: grpo\.group_sise: unknown key \(did you mean group_size\?\); expected one of: group_size, /);
  });

  it('rejects an unknown top-level section', () => {
    const [msg] = issuesOf(yaml('trainer:\n  steps: 3'));
    expect(msg).toMatch(/^bad\.yaml:8: trainer: unknown key; expected one of: run, model, tokenizer, dataset, episode, /);
  });

  it('rejects unknown keys inside sections other packages define', () => {
    const lines = issuesOf(yaml('episode:\n  tool_settings:\n    n_sgma: 2\ngraders:\n  multi_factor: { alfa: 1 }'));
    expect(lines[0]).toMatch(/^bad\.yaml:10: episode\.tool_settings\.n_sgma: unknown key \(did you mean n_sigma\?\)/);
    expect(lines[1]).toMatch(/^bad\.yaml:12: graders\.multi_factor\.alfa: unknown key \(did you mean alpha\?\)/);
    expect(lines).toHaveLength(2);
  });

  it('names the new snake_case spelling of an old camelCase key, at any depth', () => {
    const text = [
      'episode:',
      '  dMax: 5',
      '  turnsLeftNote: true',
      '  tool_settings: { spanAliases: true }',
      'generation:',
      '  backend: { kind: openai, baseUrl: http://127.0.0.1:8000/v1, model: m }',
      '  sampling: { maxTokens: 96, topP: 0.9 }',
      'graders:',
      '  recall: { rMax: 10 }',
      '  multiFactor: { alpha: 1 }',
      'stages:',
      '  priming: { sft: { teacher: { maxAnswers: 3 } } }',
    ].join('\n');
    const renamed = (path: string, to: string) =>
      expect.stringMatching(new RegExp(`^bad\\.yaml:\\d+: ${path.replace(/\./g, '\\.')}: renamed: write ${to} \\(keys are snake_case\\)$`));
    expect(issuesOf(yaml(text))).toEqual([
      renamed('episode.dMax', 'd_max'),
      renamed('episode.turnsLeftNote', 'turns_left_note'),
      renamed('episode.tool_settings.spanAliases', 'span_aliases'),
      renamed('generation.backend.baseUrl', 'base_url'),
      renamed('generation.sampling.maxTokens', 'max_tokens'),
      renamed('generation.sampling.topP', 'top_p'),
      renamed('graders.recall.rMax', 'r_max'),
      renamed('graders.multiFactor', 'multi_factor'),
      renamed('stages.priming.sft.teacher.maxAnswers', 'max_answers'),
    ]);
  });
});

describe('dataset.import', () => {
  const importing = (format: string, settings: string[]) =>
    yaml(['  import:', `    format: ${format}`, '    src: ../shared/datasets/nezha-trainticket', '    settings:', ...settings].join('\n'));

  it("checks the importer's settings with the run config: an old camelCase key is named at its line with its new spelling", () => {
    const text = importing('nezha', [
      '      importer:',
      "        date: '2023-01-29'",
      '        faultWindowSec: 120',
      '      cases:',
      '        maxCasesPerFault: 5',
      '        anomaly: { spanSlowdownMs: 0 }',
      '      gap: {}',
    ]);
    expect(issuesOf(text)).toEqual([
      'bad.yaml:14: dataset.import.settings.importer.faultWindowSec: renamed: write fault_window_sec (keys are snake_case)',
      'bad.yaml:16: dataset.import.settings.cases.maxCasesPerFault: renamed: write max_cases_per_fault (keys are snake_case)',
      'bad.yaml:17: dataset.import.settings.cases.anomaly.spanSlowdownMs: renamed: write span_slowdown_ms (keys are snake_case)',
      'bad.yaml:18: dataset.import.settings.gap: unknown key (did you mean gaps?); expected one of: importer, cases, gaps',
    ]);
  });

  it("takes each format's own settings, and names the formats there are", () => {
    const otlp = importing('otlp', ['      importer: { labels_file: faults.json, date: x }']);
    expect(issuesOf(otlp)).toEqual([
      'bad.yaml:12: dataset.import.settings.importer.date: unknown key; expected one of: labels_file, fault_window_sec',
    ]);
    expect(issuesOf(importing('csv', ['      importer: {}']))).toEqual([
      'bad.yaml:9: dataset.import.format: expected one of "nezha", "aiops2022", "otlp", got string "csv"',
    ]);
  });

  it('fills the defaults of every part of the settings', () => {
    const { config } = parseRunConfig(importing('nezha', ['      importer: { logs: false }']), join(tmp, 'ok.yaml'), { checkPaths: false });
    expect(config.dataset.import!.settings).toEqual({
      importer: { date: '2023-01-29', fault_window_sec: 180, inject_tolerance_sec: 60, logs: false },
      cases: {
        anomaly: {
          rule: 'baseline',
          thinkfl_factor: 100,
          latency_factor: 3,
          latency_sigma: 3,
          span_slowdown_ms: 50,
          call_pattern: true,
          min_baseline_count: 3,
        },
        require_truth_in_trace: true,
        max_cases_per_fault: 50,
      },
      gaps: { max_silence_sec: 300 },
    });
  });
});

describe('missing and inconsistent settings', () => {
  it('requires the dataset section', () => {
    expect(issuesOf('run: { name: a }\nmodel: { dir: /x }\n')).toEqual(['bad.yaml:1: dataset: required: expected object']);
  });

  it('requires a model dir or hub id', () => {
    expect(issuesOf('run: { name: a }\nmodel: {}\ndataset: { path: /x }\n')).toEqual([
      'bad.yaml:2: model: give dir (a local model directory) or hub_id (a Hugging Face hub id)',
    ]);
  });

  it('rejects a group of one when equal groups are skipped', () => {
    expect(issuesOf(yaml('grpo: { group_size: 1 }'))).toEqual([
      'bad.yaml:8: grpo.group_size: a group of 1 has no group-relative signal and every group would be skipped; use 2 or more',
    ]);
  });

  it('refuses a vllm backend given full-model weights (no model.lora): no server could load them', () => {
    const backend = 'generation: { backend: { kind: vllm, replicas: [http://127.0.0.1:8000/v1], policy_format: weights } }';
    expect(issuesOf(yaml(backend))).toEqual([
      "bad.yaml:8: generation.backend.policy_format: weights without model.lora is the full model, which neither vLLM's load_lora_adapter " +
        '(adapters only) nor trainer-ctl serve (ONNX) can load; set model.lora, or policy_format onnx for trainer-ctl serve replicas',
    ]);
    expect(() => parseRunConfig(yaml(backend).replace('model:', 'model:\n  lora: { r: 8, alpha: 16 }'), 'ok.yaml')).not.toThrow();
  });

  it('takes D_max once, as episode.d_max: the route grader has none of its own', () => {
    expect(issuesOf(yaml('graders:\n  route: { mu: 1, d_max: 6 }'))).toEqual([
      'bad.yaml:9: graders.route.d_max: D_max is given once, as episode.d_max; remove this key',
    ]);
    expect(issuesOf(yaml('graders:\n  route: { dMax: 6 }'))).toEqual([
      'bad.yaml:9: graders.route.dMax: D_max is given once, as episode.d_max; remove this key',
    ]);
  });

  it('reports every problem at once, in line order', () => {
    const lines = issuesOf(yaml('grpo: { group_size: x, cases: 2 }\nlogging: { level: loud }'));
    expect(lines.map((l) => l.split(': ')[1])).toEqual(['grpo.group_size', 'grpo.cases', 'logging.level']);
  });

  it('reports YAML syntax errors with their line', () => {
    expect(issuesOf('run:\n  name: [a\nmodel: 1\n')[0]).toMatch(/^bad\.yaml:\d+: \(top level\): YAML syntax: /);
  });
});

describe('input paths, checked after the schema and before any work', () => {
  it('names dataset.path and its line when the dataset directory is missing', () => {
    const missing = join(tmp, 'no-such-dataset');
    expect(issuesOf(yaml('', missing))).toEqual([
      `bad.yaml:7: dataset.path: no such directory: ${missing} (import one with \`trainer-ctl import\`)`,
    ]);
  });

  it('rejects a directory that is not an imported dataset', () => {
    expect(issuesOf(yaml('', modelDir))).toEqual([
      `bad.yaml:7: dataset.path: not an imported dataset (no meta.json in ${modelDir}; import it with \`trainer-ctl import\`)`,
    ]);
  });

  it('names model.dir when a local-only model is missing, but lets a hub model be downloaded later', () => {
    const text = yaml().replace(`dir: ${modelDir}`, `dir: ${join(tmp, 'no-model')}`);
    expect(issuesOf(text)).toEqual([`bad.yaml:5: model.dir: no such directory: ${join(tmp, 'no-model')}`]);
    const hub = yaml().replace(`dir: ${modelDir}`, 'hub_id: Qwen/Qwen2.5-3B-Instruct');
    expect(parseRunConfig(hub, join(tmp, 'hub.yaml')).config.model.hub_id).toBe('Qwen/Qwen2.5-3B-Instruct');
  });

  it('names a file it cannot read', () => {
    expect(() => loadRunConfig(join(tmp, 'absent.yaml'))).toThrow(/absent\.yaml: \(top level\): cannot read the run config: ENOENT/);
  });
});
