/**
 * Decode: the project's onnx backend against onnxruntime-genai and transformers.js on one export
 * (the trainer's: onnx/model.onnx, which the peers run, and onnx/decode.onnx, the shared-prefix
 * decode graph the backend decodes on beside it) and one ~1k-token chat prompt (a case's ThinkFL
 * prompt with two tools' schemas rendered), greedy, batch 1 and 8 (copies of the prompt: a GRPO
 * group). Tokens/s over `newTokens` new tokens per row, time to first token (a generation of
 * one new token: prompt prefill and the first pick) and from the two a step's time. Each contender
 * runs in its own process with the same intra-op threads (the project's backend too, in
 * project_decode.ts); rounds alternate the contenders. Row 0's greedy tokens must be the same for all.
 */
import { join } from 'node:path';
import type { Dataset } from '@thinkfl/env';
import { LineChild } from './child';
import { REPO_ROOT } from './env';
import { alternate, show, spread, table } from './measure';
import { decodePromptOf } from './models';

export interface DecodeSettings {
  modelDir: string;
  dataset: Dataset;
  newTokens: number;
  batches: number[];
  reps: number;
  threads: number;
  peersPython: string;
  peersNode: string;
}

interface Run {
  ms: number;
  tokens: number;
  first: number[];
}

/**
 * The backend as configured by default (its threads sleep between operators), and with
 * onnxruntime's spin-waiting threads (spin: true), which the peers keep: their difference is what
 * spinning costs on this machine at this load.
 */
const CONTENDERS = ['project', 'project, spin on', 'onnxruntime-genai', 'transformers.js'] as const;

/**
 * A step's time once the prompt is in: the medians' difference between a generation of `newTokens`
 * and one of a single token (prefill and first pick), over the steps between them. It splits a
 * contender's time into its prefill and its steps; rows that end early at EOS make it a lower bound.
 */
function stepMs(decodeMs: number, firstMs: number, newTokens: number): string {
  return newTokens > 1 ? ((decodeMs - firstMs) / (newTokens - 1)).toFixed(2) : '-';
}

export async function compareDecode(s: DecodeSettings): Promise<string> {
  const prompt = decodePromptOf(s.dataset, s.modelDir);
  const genai = new LineChild('onnxruntime-genai', s.peersPython, [
    join(import.meta.dirname, 'genai_decode.py'),
    s.modelDir,
    String(s.threads),
  ]);
  const tjs = new LineChild(
    'transformers.js',
    process.execPath,
    [join(import.meta.dirname, 'tjs_decode.mjs'), s.modelDir, String(s.threads)],
    {
      env: { PEERS_NODE: s.peersNode },
    },
  );
  const project = (name: string, spin: string) =>
    new LineChild(
      name,
      process.execPath,
      [
        '--import',
        'tsx',
        join(import.meta.dirname, 'project_decode.ts'),
        s.modelDir,
        String(s.threads),
        String(Math.max(...s.batches)),
        spin,
      ],
      { cwd: REPO_ROOT },
    );
  const children = new Map<string, LineChild>([
    ['project', project('project', 'sleep')],
    ['project, spin on', project('project, spin on', 'spin')],
    ['onnxruntime-genai', genai],
    ['transformers.js', tjs],
  ]);
  try {
    const ready = await Promise.all([...children.values()].map((c) => c.next<{ version?: string }>()));
    const versions = [ready[2].version, ready[3].version];
    const run = (name: string, batch: number, newTokens: number): Promise<Run> =>
      children.get(name)!.ask<Run>({ ids: prompt, batch, new_tokens: newTokens });
    const rows: string[][] = [];
    const mismatches: string[] = [];
    const speed = new Map<string, number>();
    for (const batch of s.batches) {
      const decode = await alternate(CONTENDERS, s.reps, (name) => run(name, batch, s.newTokens));
      const first = await alternate(CONTENDERS, s.reps, (name) => run(name, batch, 1));
      const ref = decode.get('project')![0].first;
      for (const name of CONTENDERS) {
        const d = decode.get(name)!;
        if (d[0].first.join() !== ref.join())
          mismatches.push(`batch ${batch}: ${name} row 0 [${d[0].first.slice(0, 8)}...] vs project [${ref.slice(0, 8)}...]`);
        const tps = spread(d.map((x) => x.tokens / (x.ms / 1000)));
        speed.set(`${name}/${batch}`, tps.median);
        rows.push([
          name,
          String(batch),
          show(spread(d.map((x) => x.tokens / batch)), 0),
          show(tps, 0),
          show(spread(first.get(name)!.map((x) => x.ms)), 1),
          stepMs(spread(d.map((x) => x.ms)).median, spread(first.get(name)!.map((x) => x.ms)).median, s.newTokens),
        ]);
      }
    }
    const ratios = s.batches.map((b) => {
      const p = speed.get(`project/${b}`)!;
      return `batch ${b}: project ${(p / speed.get(`transformers.js/${b}`)!).toFixed(2)}x transformers.js, ${(p / speed.get(`onnxruntime-genai/${b}`)!).toFixed(2)}x onnxruntime-genai`;
    });
    return [
      `Decode: ${s.modelDir}, prompt ${prompt.length} tokens (a case's ThinkFL chat prompt, search_traces and print_results schemas rendered), greedy, ${s.newTokens} new tokens a row, ${s.threads} threads; ` +
        `onnxruntime-genai ${versions[0]}, transformers.js ${versions[1]}; median [min-max] of ${s.reps} runs each after one warm-up`,
      table(['stack', 'batch', 'tokens a row', 'tokens/s', 'first token ms', 'ms a step after it'], rows),
      `tokens/s: ${ratios.join('; ')}`,
      mismatches.length ? `DIFFERENT greedy tokens: ${mismatches.join('; ')}` : 'row 0 greedy tokens: the same for all',
    ].join('\n');
  } finally {
    for (const c of children.values()) await c.close();
  }
}
