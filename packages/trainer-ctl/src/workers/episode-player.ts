/**
 * Plays rollout jobs with the model: the dataset and chat model are loaded once; per job the
 * backend is synced to the job's policy version, then a ModelPolicy plays the case under the
 * run's protocol and its token-level trajectory is returned (token-in/token-out).
 */
import { UnrecoverableError } from 'bullmq';
import { loadDataset, runEpisode, type Case, type Dataset } from '@thinkfl/env';
import { ModelPolicy, openBackend, type ChatModel, type GenerationBackend } from '@thinkfl/rollout';
import type { RunConfig } from '../config/schema';
import type { PolicyRef, PolicyRegistry } from '../queue/policy-registry';
import type { RolloutJob } from '../queue/jobs';
import { chatModelFromConfig } from './chat-from-config';
import { PolicySync } from './policy-sync';
import type { RolloutPlayer } from './rollout-worker';

export interface EpisodePlayer {
  play: RolloutPlayer;
  /** The policy version the backend holds, once one is loaded. */
  readonly version: number | undefined;
  close(): Promise<void>;
}

export interface EpisodePlayerOptions {
  config: RunConfig;
  registry: PolicyRegistry;
  /** The run's dataset when the caller has it loaded already; default: loaded from config.dataset.path. */
  dataset?: Dataset;
  /** Hard limit of one weight sync, ms. Default workers.sync_timeout_s of the config. */
  syncTimeoutMs?: number;
  log?: (line: string) => void;
}

/** The backend settings as opened: the run fills in what only it knows. */
function openedSettings(config: RunConfig, runId: string, ref: PolicyRef): Record<string, unknown> {
  const settings = config.generation.backend;
  // The onnx backend always runs the published policy, so generation and training share weights.
  if (settings.kind === 'onnx') return { ...settings, model_dir: ref.dir };
  if (settings.kind === 'vllm') {
    const { policy_format: _written, ...rest } = settings;
    return { lora_prefix: runId, model_dir: config.model.dir, staleness: config.workers.max_staleness, ...rest };
  }
  return settings;
}

/** Opens the configured backend on a policy directory, or moves it to the next one. */
function backendLoader(config: RunConfig, runId: string, holder: { backend?: GenerationBackend }, log?: (line: string) => void) {
  return async (ref: PolicyRef): Promise<void> => {
    if (!holder.backend) {
      holder.backend = await openBackend(openedSettings(config, runId, ref), 'generation.backend', log);
      // vllm loads version 0 the way it loads every later one.
      if (config.generation.backend.kind === 'vllm') await holder.backend.reload!(ref.dir, ref.version);
      return;
    }
    if (!holder.backend.reload) {
      throw new Error(`generation.backend ${holder.backend.name} cannot load policy version ${ref.version} (${ref.dir}): it has no reload`);
    }
    await holder.backend.reload(ref.dir, ref.version);
  };
}

export async function createEpisodePlayer(opts: EpisodePlayerOptions): Promise<EpisodePlayer> {
  const { config } = opts;
  const dataset: Dataset = opts.dataset ?? (await loadDataset(config.dataset.path));
  const cases = new Map<string, Case>(dataset.cases.map((c) => [c.id, c]));
  const chat: ChatModel = chatModelFromConfig(config);
  const holder: { backend?: GenerationBackend } = {};
  const sync = new PolicySync(
    opts.registry,
    backendLoader(config, opts.registry.runId, holder, opts.log),
    opts.syncTimeoutMs ?? config.workers.sync_timeout_s * 1000,
    opts.log,
  );
  const { protocol, ...episodeSettings } = config.episode;

  const play: RolloutPlayer = async (job: RolloutJob) => {
    const c = cases.get(job.case_id);
    if (!c)
      throw new UnrecoverableError(`rollout job ${job.group_id}#${job.sample_index}: case ${job.case_id} is not in ${config.dataset.path}`);
    const version = await sync.ensure(job.policy_version);
    const started = performance.now();
    const policy = new ModelPolicy({
      backend: holder.backend as GenerationBackend,
      chat,
      policyVersion: version,
      ...(job.prefix && { replay: job.prefix }),
      settings: {
        renderTools: config.generation.render_tools,
        temperature: job.temperature,
        topP: config.generation.sampling.top_p,
        maxTokens: config.generation.sampling.max_tokens,
        seed: job.seed,
        maxContext: config.model.max_context_tokens,
      },
    });
    const episode = await runEpisode({ dataset, case: c, policy, protocol, settings: episodeSettings });
    const t = policy.trajectory();
    const wallMs = performance.now() - started;
    return {
      group_id: job.group_id,
      case_id: job.case_id,
      sample_index: job.sample_index,
      // The version that actually generated: newer than asked for when the trainer moved on meanwhile.
      policy_version: version,
      ids: t.ids,
      mask: t.mask,
      logprobs: t.logprobs,
      temperature: t.temperature,
      turns: t.turns,
      episode,
      timing: { generate_ms: t.generateMs, tools_ms: Math.max(0, wallMs - t.generateMs), wall_ms: wallMs },
    };
  };

  return {
    play,
    get version() {
      return sync.version;
    },
    async close() {
      await holder.backend?.close();
    },
  };
}
