/** Settings of the `vllm` backend (snake_case, as run configs spell new keys). */
import { z } from 'zod';

export const vllmSettingsSchema = z
  .object({
    /** API roots of the vLLM servers (or `trainer-ctl serve` replicas), e.g. http://vllm-0:8000/v1. At least one. */
    replicas: z
      .array(z.url())
      .min(1)
      .describe('API roots of the vLLM servers (or `trainer-ctl serve` replicas), e.g. http://vllm-0:8000/v1. At least one.'),
    /**
     * Name prefix of loaded policies: version N is served as `<lora_prefix>-v<N>`. Default: the
     * run's id (the rollout worker fills it in).
     */
    lora_prefix: z
      .string()
      .min(1)
      .optional()
      .describe(
        "Name prefix of loaded policies: version N is served as `<lora_prefix>-v<N>`. Default: the run's id (the rollout worker fills it in).",
      ),
    /**
     * Backbone directory whose generation_config.json `eos_token_id` is sent as
     * `stop_token_ids`. Default: model.dir of the run (the rollout worker fills it in); a
     * directory without the file sends none.
     */
    model_dir: z
      .string()
      .min(1)
      .optional()
      .describe(
        'Backbone directory whose generation_config.json `eos_token_id` is sent as `stop_token_ids`. Default: model.dir of the run (the rollout worker fills it in); a directory without the file sends none.',
      ),
    /** Environment variable holding the servers' API key; no Authorization header when unset. Default VLLM_API_KEY. */
    api_key_env: z
      .string()
      .min(1)
      .default('VLLM_API_KEY')
      .describe("Environment variable holding the servers' API key; no Authorization header when unset. Default VLLM_API_KEY."),
    /** Hard limit of one completion request, seconds. Default 300. */
    request_timeout_s: z.number().positive().default(300).describe('Hard limit of one completion request, seconds. Default 300.'),
    /** Hard limit of one adapter load (POST /v1/load_lora_adapter, then GET /v1/models), seconds. Default 120. */
    load_timeout_s: z
      .number()
      .positive()
      .default(120)
      .describe('Hard limit of one adapter load (POST /v1/load_lora_adapter, then GET /v1/models), seconds. Default 120.'),
    /** A completion that failed on one replica (network error, 5xx, 429, adapter gone) is retried on another this many times. Default 3. */
    retries: z
      .number()
      .int()
      .min(0)
      .default(3)
      .describe(
        'A completion that failed on one replica (network error, 5xx, 429, adapter gone) is retried on another this many times. Default 3.',
      ),
    /** A load that failed on a replica is retried this many times before the replica leaves rotation. Default 2. */
    load_retries: z
      .number()
      .int()
      .min(0)
      .default(2)
      .describe('A load that failed on a replica is retried this many times before the replica leaves rotation. Default 2.'),
    /** Wait before the first retry, milliseconds; doubles with each retry. Default 500. */
    backoff_ms: z
      .number()
      .int()
      .min(0)
      .default(500)
      .describe('Wait before the first retry, milliseconds; doubles with each retry. Default 500.'),
    /** Completion requests in flight per replica; more wait their turn. Default 32. */
    concurrency_per_replica: z
      .number()
      .int()
      .positive()
      .default(32)
      .describe('Completion requests in flight per replica; more wait their turn. Default 32.'),
    /**
     * Policy versions kept loaded behind the newest: version N - k stays while k <= this, older
     * ones are unloaded once their requests finish. Default: workers.max_staleness of the run
     * (the rollout worker fills it in), else 1.
     */
    staleness: z
      .number()
      .int()
      .min(0)
      .default(1)
      .describe(
        'Policy versions kept loaded behind the newest: version N - k stays while k <= this, older ones are unloaded once their requests finish. Default: workers.max_staleness of the run (the rollout worker fills it in), else 1.',
      ),
    /** How often a replica out of rotation is probed at GET /health to take it back, milliseconds. Default 1000. */
    health_interval_ms: z
      .number()
      .int()
      .positive()
      .default(1000)
      .describe('How often a replica out of rotation is probed at GET /health to take it back, milliseconds. Default 1000.'),
    /**
     * Colocated mode: the replicas share the train ranks' GPU and sleep through every update
     * (level 1: weights and adapters to host memory, KV cache freed), woken before the new
     * version is loaded. The train worker calls POST /sleep and /wake_up; the backend wakes a
     * replica it finds asleep before loading a version on it. Needs vLLM started with
     * --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1 (trainer-ctl serve: --enable-sleep-mode),
     * and workers.max_staleness 0 (no rollout overlaps an update). Default false.
     */
    sleep_during_updates: z
      .boolean()
      .default(false)
      .describe(
        "Colocated mode: the replicas share the train ranks' GPU and sleep through every update (level 1: weights and adapters to host memory, KV cache freed), woken before the new version is loaded. The train worker calls POST /sleep and /wake_up; the backend wakes a replica it finds asleep before loading a version on it. Needs vLLM started with --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1 (trainer-ctl serve: --enable-sleep-mode), and workers.max_staleness 0 (no rollout overlaps an update). Default false.",
      ),
  })
  .strict();

export type VllmSettings = z.input<typeof vllmSettingsSchema>;
