/**
 * Tiny models for the backend and serve tests, fine-tuned by the real train engine (created by
 * testkit/tiny-model.ts, memorizing one conversation, exported to ONNX with its KV-cache signature).
 * The engine lives in trainer-ctl; only these tests reach up to it, to get a real policy.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getTool, loadDataset, toolSpec, type ChatMessage, type ToolSpec } from '@thinkfl/env';
import { loadChatModel } from '../src/chat/chat-model';
import { tokenizeEpisode } from '../src/chat/episode-tokens';
import { TrainEngine } from '../../trainer-ctl/src/engine';
import { NEZHA_DATASET, REPO_ROOT } from '../../../testkit/nezha';

export function scratchDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), `h7-${prefix}-`));
}

/** SFT on one tokenized conversation until the model reproduces it; writes and exports outDir. */
export async function memorize(modelDir: string, ids: number[], mask: number[], outDir: string): Promise<number> {
  const engine = new TrainEngine();
  try {
    await engine.request('load', { model_dir: modelDir, seed: 0, optimizer: { lr: 1e-2 } });
    let loss = Infinity;
    for (let step = 0; step < 300 && loss > 0.01; step++)
      loss = (await engine.request('sft_step', { input_ids: [ids], mask: [mask] })).loss;
    await engine.request('save', { dir: outDir });
    await engine.request('export', { dir: outDir, format: 'onnx' });
    return loss;
  } finally {
    await engine.shutdown();
  }
}

export interface ToolCaller {
  /** The memorized model directory. */
  dir: string;
  /** Its SFT loss when memorizing stopped. */
  loss: number;
  tools: ToolSpec[];
  /** System and user turns of the first Nezha case; the model answers them with one search_traces call. */
  messages: ChatMessage[];
  entrySpanId: string;
}

/**
 * `base` fine-tuned until it answers the first Nezha case's opening turns (tools search_traces and
 * print_results offered) with `search_traces` on the entry span; written and exported to outDir.
 */
export async function toolCallerModel(base: string, outDir: string): Promise<ToolCaller> {
  const c = (await loadDataset(NEZHA_DATASET)).cases[0];
  const tools = ['search_traces', 'print_results'].map((n) => toolSpec(getTool(n)!));
  const messages: ChatMessage[] = [
    { role: 'system', content: 'Localize the root cause of the anomalous request.' },
    { role: 'user', content: `The request's entry span is ${c.entry_span_id} (trace ${c.trace_id}).` },
  ];
  const answer: ChatMessage = {
    role: 'assistant',
    content: '',
    tool_calls: [
      {
        id: 'call_1',
        type: 'function',
        function: { name: 'search_traces', arguments: JSON.stringify({ parent_span_id: c.entry_span_id }) },
      },
    ],
  };
  const chat = loadChatModel(base);
  const episode = tokenizeEpisode([...messages, answer], chat.template, chat.tokenizer, { tools });
  const loss = await memorize(base, episode.ids, episode.mask, outDir);
  return { dir: outDir, loss, tools, messages, entrySpanId: c.entry_span_id };
}

/** POSTs `body` as JSON to `url`; the reply's status and text. */
export async function postJson(url: string, body: unknown): Promise<{ status: number; text: string }> {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.status, text: await r.text() };
}

export interface ServeProcess {
  url: string;
  stop(): Promise<number | null>;
}

/** `trainer-ctl serve` as its own process on a free loopback port. */
export async function startServeProcess(modelDir: string, args: string[] = []): Promise<ServeProcess> {
  const child = spawn(
    process.execPath,
    [
      join(REPO_ROOT, 'packages', 'trainer-ctl', 'bin', 'trainer-ctl.mjs'),
      'serve',
      '--model',
      modelDir,
      '--port',
      '0',
      '--threads',
      '1',
      ...args,
    ],
    {
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let out = '';
  const exited = new Promise<number | null>((done) => child.once('exit', (code) => done(code)));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (b) => {
      out += b;
      const m = /serving \S+ at (\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.stderr.on('data', (b) => (out += b));
    void exited.then((code) => reject(new Error(`trainer-ctl serve exited with ${code}:\n${out}`)));
  });
  return {
    url,
    stop: async () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
}
