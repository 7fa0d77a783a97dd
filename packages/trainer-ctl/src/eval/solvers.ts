/**
 * The policies `trainer-ctl eval` can play, each turned into a Solve: a scripted policy or
 * baseline of the environment, a model (or checkpoint) directory on the `onnx` backend (token-in/token-out
 * through the model's own tokenizer and chat template, as in training), or a model on any
 * OpenAI-compatible server through chat completions with tools. Every agent plays the same
 * protocol and episode settings, so their figures compare.
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { getPolicy, runEpisode, solverFor, type Dataset, type Solve } from '@thinkfl/env';
import {
  ChatPolicy,
  loadChatModel,
  ModelPolicy,
  openBackend,
  type ChatModel,
  type GenerationBackend,
  type ModelPolicySettingsInput,
} from '@thinkfl/rollout';
import { loadRunConfig } from '../config/index';
import { TrainEngine } from '../engine/index';

export type PolicySpec =
  | { kind: 'scripted'; name: string }
  | { kind: 'onnx'; dir: string }
  | { kind: 'openai'; baseUrl: string; model: string };

/** How model policies play: the protocol, its episode settings and the sampling of every turn. */
export interface PlaySettings {
  /** Protocol every agent plays; unset: a scripted policy plays its own, a model plays rot. */
  protocol?: string;
  /** Episode settings of @thinkfl/env (d_max, tools, tool_settings, ...). */
  episode: Record<string, unknown>;
  /** Softmax temperature of model turns; 0 is greedy. */
  temperature: number;
  /** Most tokens of one model turn. */
  maxTokens: number;
  /** onnx: render the tool schemas into the prompt (the run's generation.render_tools). */
  renderTools: boolean;
  /** onnx: longest episode in tokens (the run's model.max_context_tokens). */
  maxContext?: number;
  /** Episodes played at once; also the openai backend's requests in flight. */
  concurrency: number;
  /** onnx: onnxruntime threads per operator (0 lets it choose). */
  threads: number;
}

export interface OpenedSolver {
  label: string;
  solve: Solve;
  /** The protocol played, or null for a ranker that answers without one. */
  protocol: string | null;
  close(): Promise<void>;
}

/** The label a policy has in tables and files. */
export function specLabel(spec: PolicySpec): string {
  if (spec.kind === 'scripted') return spec.name;
  if (spec.kind === 'onnx') return spec.dir;
  return `${spec.model}@${spec.baseUrl}`;
}

/**
 * The run config a model directory was trained by: config.yaml of the nearest enclosing run
 * directory (one with state.json), as `trainer-ctl train` copies it there.
 */
export function enclosingRunConfig(modelDir: string): string | undefined {
  for (let d = resolve(modelDir); ; d = dirname(d)) {
    if (existsSync(join(d, 'config.yaml')) && existsSync(join(d, 'state.json'))) return join(d, 'config.yaml');
    if (dirname(d) === d) return undefined;
  }
}

/** Episode and generation settings from a run config, so a model plays as it was trained. */
export function playSettingsFromConfig(
  file: string,
): Pick<PlaySettings, 'protocol' | 'episode' | 'maxTokens' | 'renderTools' | 'maxContext'> {
  const { config } = loadRunConfig(file, { checkPaths: false });
  const { protocol, ...episode } = config.episode;
  return {
    protocol,
    episode,
    maxTokens: config.generation.sampling.max_tokens,
    renderTools: config.generation.render_tools,
    maxContext: config.model.max_context_tokens,
  };
}

/** A directory the onnx backend can open: the model directory itself, or a checkpoint exported by the train engine. */
async function onnxDir(dir: string): Promise<{ dir: string; cleanup: () => void }> {
  if (existsSync(join(dir, 'onnx', 'model.onnx')) || existsSync(join(dir, 'model.onnx'))) return { dir, cleanup: () => {} };
  if (!existsSync(join(dir, 'config.json')))
    throw new Error(`--model ${dir}: neither an ONNX model (onnx/model.onnx) nor a checkpoint (config.json and weights)`);
  // A checkpoint holds weights only (policies/v<N> hold the ONNX export): export it the way the train worker does.
  const out = mkdtempSync(join(tmpdir(), 'eval-export-'));
  const engine = new TrainEngine();
  try {
    await engine.request('load', { model_dir: dir });
    await engine.request('export', { dir: out, format: 'onnx' });
  } catch (e) {
    rmSync(out, { recursive: true, force: true });
    throw new Error(`--model ${dir}: exporting the checkpoint to ONNX failed: ${(e as Error).message}`);
  } finally {
    await engine.shutdown();
  }
  return { dir: out, cleanup: () => rmSync(out, { recursive: true, force: true }) };
}

/** A model (or checkpoint) directory on the in-process onnx backend, with its tokenizer and chat template. */
export async function openOnnxModel(
  dir: string,
  threads: number,
): Promise<{ chat: ChatModel; backend: GenerationBackend; close(): Promise<void> }> {
  const chat = loadChatModel(dir);
  const model = await onnxDir(dir);
  const backend = await openBackend({ kind: 'onnx', model_dir: model.dir, threads }, '--model').catch((e: Error) => {
    model.cleanup();
    throw e;
  });
  return {
    chat,
    backend,
    close: async () => {
      await backend.close();
      model.cleanup();
    },
  };
}

/** A model policy's settings under the play settings, at the given temperature. */
export function modelPolicySettings(s: PlaySettings, temperature: number, seed?: number): ModelPolicySettingsInput {
  return {
    temperature,
    maxTokens: s.maxTokens,
    renderTools: s.renderTools,
    ...(s.maxContext !== undefined && { maxContext: s.maxContext }),
    ...(seed !== undefined && { seed }),
  };
}

/** One fresh policy per episode (a ModelPolicy holds one episode's tokens) over a shared backend. */
function modelSolver(
  dataset: Dataset,
  backend: GenerationBackend,
  play: (b: GenerationBackend) => ChatPolicy | ModelPolicy,
  s: PlaySettings,
  protocol: string,
): Solve {
  return async (c) => {
    const record = await runEpisode({ dataset, case: c, policy: play(backend), protocol, settings: s.episode });
    return { answer: record.answer, episode: record };
  };
}

export async function openSolver(dataset: Dataset, spec: PolicySpec, s: PlaySettings): Promise<OpenedSolver> {
  const label = specLabel(spec);
  if (spec.kind === 'scripted') {
    const def = getPolicy(spec.name);
    const protocol = s.protocol ?? (def.kind === 'agent' ? def.protocol : undefined) ?? 'rot';
    const solve = solverFor(dataset, spec.name, { protocol, episode: s.episode });
    return { label, solve, protocol: def.kind === 'ranker' ? null : protocol, close: async () => {} };
  }
  const protocol = s.protocol ?? 'rot';
  if (spec.kind === 'onnx') {
    const { chat, backend, close } = await openOnnxModel(spec.dir, s.threads);
    const settings = modelPolicySettings(s, s.temperature);
    const solve = modelSolver(dataset, backend, (b) => new ModelPolicy({ backend: b, chat, settings, name: label }), s, protocol);
    return { label, solve, protocol, close };
  }
  const backend = await openBackend({ kind: 'openai', base_url: spec.baseUrl, model: spec.model, concurrency: s.concurrency }, '--openai');
  const solve = modelSolver(
    dataset,
    backend,
    (b) => new ChatPolicy(b, { temperature: s.temperature, maxTokens: s.maxTokens }, label),
    s,
    protocol,
  );
  return { label, solve, protocol, close: () => backend.close() };
}
