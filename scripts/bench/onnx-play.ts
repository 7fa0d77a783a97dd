/**
 * What the onnx rollout benches share: every onnxruntime session run reported with its feeds and
 * time, and episodes played with a run config's settings on a fresh onnx backend of an exported
 * policy (a fresh backend, as each GRPO step's new policy version gets one).
 */
import * as ort from 'onnxruntime-node';
import { evaluate, runEpisode, type Case, type Dataset, type Solve } from '@thinkfl/env';
import { loadChatModel, ModelPolicy, openOnnxBackend, type OnnxSettings } from '@thinkfl/rollout';
import { modelPolicySettings, type playSettingsFromConfig } from '../../packages/trainer-ctl/src/eval/solvers';

/** Calls `onRun` after every onnxruntime session run of this process with its feeds and milliseconds. */
export function onOrtRuns(onRun: (feeds: Record<string, ort.Tensor>, ms: number) => void): void {
  const sessions = (ort.InferenceSession as unknown as { prototype: ort.InferenceSession }).prototype;
  const run = sessions.run;
  sessions.run = async function (this: ort.InferenceSession, ...args: Parameters<typeof run>) {
    const t0 = performance.now();
    const out = await run.apply(this, args);
    onRun(args[0] as Record<string, ort.Tensor>, performance.now() - t0);
    return out;
  } as typeof run;
}

export interface PlayOptions {
  dataset: Dataset;
  /** One episode per entry (a case repeated group_size times for a GRPO step). */
  episodes: Case[];
  policyDir: string;
  backend: Pick<OnnxSettings, 'spin' | 'prompt_cache_mb' | 'prefill_chunk'> & { threads: number };
  play: ReturnType<typeof playSettingsFromConfig>;
  /** Episodes at once (workers.rollout.concurrency). */
  concurrency: number;
  temperature: number;
}

/** Plays `episodes` on a fresh backend of the policy; the wall milliseconds of the playing alone. */
export async function playOnFreshBackend(o: PlayOptions): Promise<number> {
  const backend = await openOnnxBackend({ model_dir: o.policyDir, ...o.backend });
  const chat = loadChatModel(o.policyDir);
  const settings = modelPolicySettings(
    { ...o.play, concurrency: o.concurrency, threads: o.backend.threads, temperature: o.temperature },
    o.temperature,
  );
  const solve: Solve = async (c) => {
    const policy = new ModelPolicy({ backend, chat, settings });
    const record = await runEpisode({ dataset: o.dataset, case: c, policy, protocol: o.play.protocol ?? 'rot', settings: o.play.episode });
    return { answer: record.answer, episode: record };
  };
  try {
    const t0 = performance.now();
    await evaluate(o.dataset, o.episodes, solve, { concurrency: o.concurrency });
    return performance.now() - t0;
  } finally {
    await backend.close();
  }
}

export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1];
