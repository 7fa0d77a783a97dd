/**
 * `trainer-ctl eval` on models: a tiny model fine-tuned (by the real engine) to replay the
 * scripted expert's episode on a real Nezha case is evaluated as a model directory on the onnx
 * backend, as a checkpoint (weights only, exported by the engine first), and behind a real
 * `trainer-ctl serve` through --openai; each beside
 * the expert in one table, with vote ranks, the JSON and the transcripts.
 */
import { execFile } from 'node:child_process';
import { cpSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createExpert,
  ExpertSettingsSchema,
  loadDataset,
  runEpisode,
  type Dataset,
  type EpisodeRecord,
  type Policy,
  type ToolSpec,
} from '@thinkfl/env';
import { loadChatModel } from '@thinkfl/rollout';
import { callsOnly } from '@thinkfl/env';
import { sftSample } from '../src/sft/index';
import { memorize, scratchDir, startServeProcess, type ServeProcess } from '../../rollout/test/backend-fixtures';
import { createTinyModel } from '../../../testkit/tiny-model';
import { ensureNezhaDataset, REPO_ROOT } from '../../../testkit/nezha';

const run = promisify(execFile);
const BIN = join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs');
const dir = scratchDir('eval-models');
const EPISODE = { protocol: 'rot', d_max: 2, tool_settings: { span_aliases: true } };
let datasetDir: string;
let dataset: Dataset;
let modelDir: string;
/** The same weights as a checkpoint holds them: no ONNX export. */
let checkpointDir: string;
let configFile: string;
let expertRecord: EpisodeRecord;
let memorizedLoss: number;
let serve: ServeProcess | undefined;

async function evalCli(args: string[]) {
  return run(process.execPath, [BIN, 'eval', '--dataset', datasetDir, '--config', configFile, ...args], { cwd: dir, maxBuffer: 1 << 24 });
}

interface Line {
  policy: string;
  case_id: string;
  answer: unknown;
  ranks: Record<string, number | null>;
  episode: EpisodeRecord;
}
const readLines = (f: string): Line[] =>
  readFileSync(f, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Line);

beforeAll(async () => {
  datasetDir = await ensureNezhaDataset();
  dataset = await loadDataset(datasetDir);
  const c = dataset.cases[0]; // what --limit 1 evaluates
  const { protocol, ...episode } = EPISODE;
  // The expert's episode without free text (short enough to memorize), with the tools it was offered.
  let tools: ToolSpec[] = [];
  const expert = callsOnly(createExpert(dataset, ExpertSettingsSchema.parse({})));
  const recorder: Policy = { name: 'expert', next: (ctx) => ((tools = ctx.turn === 0 ? ctx.tools : tools), expert.next(ctx)) };
  expertRecord = await runEpisode({ dataset, case: c, policy: recorder, protocol, settings: episode });
  const base = await createTinyModel(join(dir, 'base'), 5);
  const sample = sftSample({ case: c, record: expertRecord, tools, untrainedTurns: [] }, loadChatModel(base));
  modelDir = join(dir, 'replayer');
  memorizedLoss = await memorize(base, sample.ids, sample.mask, modelDir);
  checkpointDir = join(dir, 'checkpoint');
  cpSync(modelDir, checkpointDir, { recursive: true, filter: (src) => !src.includes('/onnx') && !src.endsWith('.onnx') });
  configFile = join(dir, 'run.yaml');
  writeFileSync(
    configFile,
    `run: { name: eval-models }
model: { dir: ${modelDir} }
dataset: { path: ${datasetDir} }
episode: { protocol: rot, d_max: 2, tool_settings: { span_aliases: true } }
generation: { backend: { kind: onnx }, render_tools: true, sampling: { max_tokens: 160 } }
`,
  );
}, 900_000);
afterAll(async () => {
  if (serve) expect(await serve.stop()).toBe(0);
});

describe('trainer-ctl eval on models', () => {
  it('evaluates a model directory and a checkpoint on the onnx backend beside the expert: same episode, same answer, same ranks', async () => {
    expect(memorizedLoss).toBeLessThan(0.05);
    expect(existsSync(join(checkpointDir, 'onnx'))).toBe(false);
    const out = join(dir, 'onnx.json');
    const episodes = join(dir, 'onnx-episodes.jsonl');
    const { stdout } = await evalCli([
      '--model',
      modelDir,
      '--model',
      checkpointDir,
      '--policy',
      'expert',
      '--limit',
      '1',
      '--threads',
      '1',
      '--out',
      out,
      '--episodes',
      episodes,
    ]);
    const json = JSON.parse(readFileSync(out, 'utf8'));
    // Scripted policies first, then models, each in the order given.
    expect(json.policies.map((p: { policy: string }) => p.policy)).toEqual(['expert', modelDir, checkpointDir]);
    const [exp, model, checkpoint] = json.policies;
    expect(model.protocol).toBe('rot');
    expect(model.requests[0].answer).toEqual(expertRecord.answer);
    expect(model.requests[0].ranks).toEqual(exp.requests[0].ranks);
    expect(model.faults[0].vote_ranks).toEqual(exp.faults[0].vote_ranks);
    expect(checkpoint.requests[0].answer).toEqual(expertRecord.answer);
    // One request per fault: its vote is its own top-1, so vote and best rank agree at R@1.
    expect(model.per_fault_vote.service.recall[1]).toBe(model.requests[0].ranks.service === 0 ? 1 : 0);

    const lines = readLines(episodes);
    expect(lines.map((l) => l.policy)).toEqual(['expert', modelDir, checkpointDir]);
    const said = (e: EpisodeRecord) => e.messages.filter((m) => m.role === 'assistant').map((m) => m.content);
    expect(said(lines[1].episode)).toEqual(said(expertRecord));
    expect(said(lines[2].episode)).toEqual(said(expertRecord));
    expect(lines[1].episode.stop_reason).toBe(expertRecord.stop_reason);
    // The expert's episode ends with its own answer after well-formed calls; the replayer plays it back.
    expect(expertRecord.stop_reason).toBe('answered');
    const type = dataset.faults.find((f) => f.id === dataset.cases[0].fault_id)!.type;
    for (const p of [exp, model, checkpoint])
      expect(p.episodes).toEqual({
        format_valid: 1,
        answered: 1,
        tool_calls: expertRecord.tool_calls.length,
        format_valid_by_type: { [type]: { cases: 1, format_valid: 1 } },
      });
    expect(stdout).toContain(
      `${modelDir}: format validity 1.00, answered 1.00, tool calls ${expertRecord.tool_calls.length.toFixed(1)} an episode; ` +
        `by fault type: ${type} 1.00 (1)`,
    );

    for (const scope of ['per request, service', 'per fault, service', 'per fault by vote, service', 'per fault by vote, pod']) {
      for (const p of [modelDir, checkpointDir, 'expert'])
        expect(stdout).toMatch(new RegExp(`${scope}\\s+${p.replace(/[/.]/g, '\\$&')}\\s+1(\\s+\\d+\\.\\d\\d){5}\\s+\\d\\.\\d{4}`));
    }
  });

  it('evaluates the same model served by trainer-ctl serve through --openai, with a concurrency limit', async () => {
    serve = await startServeProcess(modelDir);
    const out = join(dir, 'openai.json');
    const episodes = join(dir, 'openai-episodes.jsonl');
    const { stdout, stderr } = await evalCli([
      '--openai',
      serve.url,
      '--model',
      'replayer',
      '--limit',
      '2',
      '--concurrency',
      '2',
      '--out',
      out,
      '--episodes',
      episodes,
    ]);
    const label = `replayer@${serve.url}`;
    expect(stderr).toContain(`eval ${label} 2/2 100%`);
    const json = JSON.parse(readFileSync(out, 'utf8'));
    expect(json.policy).toBe(label);
    expect(json.protocol).toBe('rot');
    expect(json.requests).toHaveLength(2);
    expect(json.faults.every((f: { vote_ranks: object }) => 'service' in f.vote_ranks)).toBe(true);
    expect(stdout).toMatch(/per fault by vote, service\s+2(\s+\d+\.\d\d){5}\s+\d\.\d{4}/);

    // The served model answered through chat completions: its first tool call is the expert's, as structured tool_calls.
    const [first] = readLines(episodes);
    expect(first.case_id).toBe(dataset.cases[0].id);
    const reply = first.episode.messages.find((m) => m.role === 'assistant')!;
    const expertCall = JSON.parse(
      /<tool_call>\n([\s\S]*)\n<\/tool_call>/.exec(expertRecord.messages.find((m) => m.role === 'assistant')!.content)![1],
    );
    expect(reply.tool_calls).toHaveLength(1);
    expect(reply.tool_calls![0].function.name).toBe(expertCall.name);
    expect(JSON.parse(reply.tool_calls![0].function.arguments)).toEqual(expertCall.arguments);
    expect(first.episode.tool_calls[0].observation).toEqual(expertRecord.tool_calls[0].observation);
  });

  it('refuses --openai without a model name and an eval without a policy', async () => {
    await expect(evalCli(['--openai', 'http://127.0.0.1:9/v1'])).rejects.toMatchObject({
      stderr: expect.stringMatching(/--openai needs --model NAME/),
    });
    await expect(evalCli(['--limit', '1'])).rejects.toMatchObject({ stderr: expect.stringMatching(/name a policy to evaluate/) });
  });
});
