/**
 * One engine contract (issue 28 item 2): the zod schemas of protocol.ts, exported to the
 * committed engine/thinkfl_engine/protocol.schema.json, are what the Python engine validates
 * requests with. The same hand-labelled fixture requests must be accepted or refused alike by
 * both validators, and a field added on one side only fails here.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENGINE_DIR, ENGINE_OPS, ENGINE_PYTHON, TrainEngine, engineProtocolJsonSchema, type EngineOp } from '../src/engine';

const SCHEMA_FILE = join(ENGINE_DIR, 'thinkfl_engine', 'protocol.schema.json');

interface Fixture {
  op: EngineOp;
  args: unknown;
  /** Hand-labelled: does the protocol accept it? */
  accept: boolean;
  why: string;
}

const ids = [[1, 2, 3]];
const step = { input_ids: ids, mask: [[0, 1, 1]], advantages: [1] };
const lossBatch = { logp: [[0, -0.5]], old: [[0, -0.4]], mask: [[0, 1]], advantages: [1] };
const FIXTURES: Fixture[] = [
  { op: 'info', args: {}, accept: true, why: 'no args' },
  { op: 'info', args: { verbose: true }, accept: false, why: 'unknown field' },
  { op: 'load', args: { model_dir: 'm' }, accept: true, why: 'only the model dir' },
  { op: 'load', args: {}, accept: false, why: 'model_dir missing' },
  { op: 'load', args: { model_dir: 'm', dtype: 'int8' }, accept: false, why: 'dtype not a float type' },
  { op: 'load', args: { model_dir: 'm', autocast: 'auto', lora: { r: 8, alpha: 16 } }, accept: true, why: 'auto precision, LoRA' },
  { op: 'load', args: { model_dir: 'm', lora: { r: 0, alpha: 16 } }, accept: false, why: 'LoRA rank 0' },
  { op: 'load', args: { model_dir: 'm', optimizer: { lr: 1e-4 } }, accept: true, why: 'partial optimizer settings' },
  { op: 'load', args: { model_dir: 'm', optimizer: { lr: -1 } }, accept: false, why: 'negative lr' },
  { op: 'load', args: { model_dir: 'm', optimizer: { momentum: 0.9 } }, accept: false, why: 'not an AdamW setting' },
  { op: 'load', args: { model_dir: 'm', optimizer: { betas: [0.9, 1] } }, accept: false, why: 'beta2 = 1' },
  { op: 'grpo_step', args: step, accept: true, why: 'inline batch, default loss' },
  {
    op: 'grpo_step',
    args: { ...step, loss: { aggregation: 'seq-mean-token-sum-norm' } },
    accept: false,
    why: 'Dr.GRPO without norm_length',
  },
  { op: 'grpo_step', args: { ...step, loss: { aggregation: 'seq-mean-token-sum-norm', norm_length: 8 } }, accept: true, why: 'Dr.GRPO' },
  { op: 'grpo_step', args: { ...step, loss: { ratio_level: 'sequence' } }, accept: false, why: 'GSPO with token-mean (default)' },
  { op: 'grpo_step', args: { ...step, loss: { ratio_level: 'sequence', aggregation: 'seq-mean-token-mean' } }, accept: true, why: 'GSPO' },
  { op: 'grpo_step', args: { ...step, loss: { dual_clip: 1 } }, accept: false, why: 'dual clip must be > 1' },
  { op: 'grpo_step', args: { ...step, loss: { dual_clip: 1.5, kl_coef: 0.1, kl_estimator: 'k2' } }, accept: true, why: 'dual clip, KL k2' },
  { op: 'grpo_step', args: { ...step, loss: { kl_estimator: 'k4' } }, accept: false, why: 'no such estimator' },
  { op: 'grpo_step', args: { ...step, loss: { eps_low: -0.1 } }, accept: false, why: 'negative clip range' },
  { op: 'grpo_step', args: { ...step, loss: { clip: 0.2 } }, accept: false, why: 'unknown loss setting' },
  { op: 'grpo_step', args: { ...step, input_ids: [[1, -2, 3]] }, accept: false, why: 'negative token id' },
  { op: 'grpo_step', args: { ...step, input_ids: [[1, 2.5, 3]] }, accept: false, why: 'fractional token id' },
  { op: 'grpo_step', args: { ...step, temperature: [0.7] }, accept: true, why: 'per-sequence temperature' },
  { op: 'grpo_step', args: { ...step, temperature: 'hot' }, accept: false, why: 'temperature not a number' },
  { op: 'grpo_step', args: { ...step, settings: {} }, accept: false, why: "the loss op's old field name" },
  { op: 'sft_step', args: { input_ids: ids, mask: [[0, 1, 1]], lr: 1e-5 }, accept: true, why: 'SFT step' },
  { op: 'sft_step', args: { input_ids: ids, mask: [[0, 1, 1]], advantages: [1] }, accept: false, why: 'advantages are GRPO only' },
  { op: 'batch_stats', args: { batch: { path: 'f', bytes: 10, sha256: 'ab' } }, accept: true, why: 'a batch file' },
  {
    op: 'batch_stats',
    args: { batch: { path: 'f', bytes: 10, sha256: 'ab', row_range: [0] } },
    accept: false,
    why: 'row range of one end',
  },
  { op: 'set_reference', args: { tag: 'stage-2' }, accept: true, why: 'tagged reference' },
  { op: 'set_reference', args: { tag: '' }, accept: false, why: 'empty tag' },
  { op: 'export', args: { dir: 'd' }, accept: true, why: 'default format' },
  { op: 'export', args: { dir: 'd', format: 'gguf' }, accept: false, why: 'unknown format' },
  { op: 'create_tiny', args: { out_dir: 'd', config: { vocab_size: 100 } }, accept: true, why: 'defaults but the vocabulary' },
  { op: 'create_tiny', args: { out_dir: 'd', config: {} }, accept: false, why: 'vocab_size missing' },
  {
    op: 'create_tiny',
    args: { out_dir: 'd', config: { vocab_size: 100, head_dim: 63 } },
    accept: false,
    why: 'odd head width (RoPE pairs)',
  },
  { op: 'memory', args: { reset: true }, accept: true, why: 'reset the peak' },
  { op: 'memory', args: { reset: 'yes' }, accept: false, why: 'reset not a boolean' },
  { op: 'loss', args: { ...lossBatch, loss: { kl_coef: 0.1 }, ref: [[0, -0.45]] }, accept: true, why: 'loss with KL' },
  { op: 'loss', args: { logp: lossBatch.logp, mask: lossBatch.mask, advantages: [1] }, accept: false, why: 'old missing' },
  { op: 'shutdown', args: {}, accept: true, why: 'no args' },
];

/** The Python side's verdicts: protocol.check_args of the engine package, one per fixture. */
function pythonVerdicts(fixtures: Fixture[]): { accept: boolean; error: string | null }[] {
  const script = `
import json, sys
from thinkfl_engine import protocol
out = []
for f in json.load(sys.stdin):
    try:
        protocol.check_args(f['op'], f['args'])
        out.append({'accept': True, 'error': None})
    except protocol.ProtocolError as e:
        out.append({'accept': False, 'error': str(e)})
print(json.dumps(out))
`;
  const stdout = execFileSync(ENGINE_PYTHON, ['-c', script], {
    input: JSON.stringify(fixtures),
    env: { ...process.env, PYTHONPATH: ENGINE_DIR },
    encoding: 'utf8',
  });
  return JSON.parse(stdout);
}

describe('engine contract', () => {
  it('the committed protocol.schema.json is what protocol.ts exports (regenerate: npx tsx scripts/engine-schema.ts > engine/thinkfl_engine/protocol.schema.json)', () => {
    expect(JSON.parse(readFileSync(SCHEMA_FILE, 'utf8'))).toEqual(engineProtocolJsonSchema());
    expect(readFileSync(SCHEMA_FILE, 'utf8')).toBe(`${JSON.stringify(engineProtocolJsonSchema(), null, 2)}\n`);
  });

  it('TypeScript and Python accept and refuse the same fixture requests, as hand-labelled', () => {
    const ts = FIXTURES.map((f) => ENGINE_OPS[f.op].args.safeParse(f.args).success);
    const py = pythonVerdicts(FIXTURES);
    const rows = FIXTURES.map((f, i) => `${f.op} (${f.why}): label ${f.accept}, zod ${ts[i]}, python ${py[i].accept}`);
    expect(rows).toEqual(FIXTURES.map((f) => `${f.op} (${f.why}): label ${f.accept}, zod ${f.accept}, python ${f.accept}`));
  });

  it("Python's refusals name the op and the field", () => {
    const [drGrpo, missing, unknown, estimator] = pythonVerdicts([FIXTURES[12], FIXTURES[3], FIXTURES[20], FIXTURES[18]]);
    expect(drGrpo.error).toBe('grpo_step: loss: seq-mean-token-sum-norm (Dr.GRPO) needs norm_length');
    expect(missing.error).toBe("load: missing argument 'model_dir'");
    expect(unknown.error).toMatch(/^grpo_step: loss: Additional properties are not allowed \('clip' was unexpected\)/);
    expect(estimator.error).toBe("grpo_step: loss.kl_estimator must be one of ['k1', 'k2', 'k3'], got 'k4'");
  });

  it("the engine's op table and its loss defaults are the schema's", () => {
    const script = `
import dataclasses, json
from thinkfl_engine import protocol
from thinkfl_engine.grpo_loss import LossSettings
from thinkfl_engine.ops import OPS
schema = json.loads(protocol.SCHEMA_FILE.read_text())
loss = schema['ops']['loss']['args']['properties']['loss']['properties']
print(json.dumps({'ops': sorted(OPS), 'schema_ops': protocol.OP_NAMES,
                  'defaults': {f.name: f.default for f in dataclasses.fields(LossSettings)},
                  'schema_defaults': {k: v['default'] for k, v in loss.items()}}))
`;
    const got = JSON.parse(
      execFileSync(ENGINE_PYTHON, ['-c', script], { env: { ...process.env, PYTHONPATH: ENGINE_DIR }, encoding: 'utf8' }),
    );
    expect(got.ops).toEqual(Object.keys(ENGINE_OPS).sort());
    expect(got.schema_ops).toEqual(Object.keys(ENGINE_OPS).sort());
    expect(got.defaults).toEqual(got.schema_defaults);
  });

  describe('replies of a real engine that checks its own replies', () => {
    let engine: TrainEngine;
    beforeAll(() => {
      engine = new TrainEngine({ env: { THINKFL_ENGINE_CHECK_REPLIES: '1' } });
    });
    afterAll(async () => {
      await engine.shutdown();
    });

    it('info, memory and loss replies match the result schemas on both sides', async () => {
      const replies = {
        info: await engine.request('info', {}),
        memory: await engine.request('memory', { reset: false }),
        loss: await engine.request('loss', { ...lossBatch, loss: { aggregation: 'seq-mean-token-mean' } }),
      };
      for (const [op, reply] of Object.entries(replies)) expect(ENGINE_OPS[op as EngineOp].result.safeParse(reply).success, op).toBe(true);
      // One token, on-policy ratio exp(-0.1) in the clip range: pg = -A r.
      expect(replies.loss.loss).toBeCloseTo(-Math.exp(-0.1), 12);
    });

    it('a request the schema refuses gets an error and the engine keeps serving', async () => {
      await expect(engine.request('memory', { reset: 'yes' } as never)).rejects.toThrow(/^memory: reset: 'yes' is not of type 'boolean'/);
      expect((await engine.request('info', {})).loaded).toBe(false);
    });
  });
});
