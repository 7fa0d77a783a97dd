/**
 * The `vllm` backend: token-in/token-out completions on several vLLM servers, with the policy
 * synced over HTTP as LoRA adapters. Loading version N (a directory the trainer wrote with a
 * checksum manifest) calls POST /v1/load_lora_adapter on every replica in rotation under
 * `<prefix>-v<N>-<digest of the manifest>`, a name no other weights can have (vLLM keeps the
 * first adapter loaded under a name: a resumed run, or a second run of the same name, would
 * otherwise sample what a long-lived server still holds), and checks that GET /v1/models lists
 * it with the version's directory as root; only then are requests for N sent, always naming that
 * model (never the base model: a reply from another model is an error). Sampling fields vLLM
 * would otherwise take from the model's generation_config.json (top_k, min_p, penalties) are
 * sent switched off, so that with --logprobs-mode processed_logprobs the log-probabilities are
 * log-softmax(logits / T), what the train engine recomputes. Versions older than
 * the staleness window are unloaded once their last request has finished. A replica that
 * fails is taken out of rotation, probed at GET /health, and taken back only after it holds
 * the current version again; a request it failed is retried on another.
 */
import { readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { formatZodIssues } from '@thinkfl/env';
import { HttpError } from '../openai/http';
import { completionResponseSchema, readCompletionChoice } from '../openai/responses';
import { resolveSampling, type Generation, type GenerationBackend, type GenerationRequest } from '../types';
import { manifestDigest, verifyManifest } from './manifest';
import { Replica } from './replica';
import { vllmSettingsSchema, type VllmSettings } from './settings';
import { SleepClient } from './sleep';

interface Version {
  dir: string;
  name: string;
  /** Requests running on it now. */
  inflight: number;
  /** Outside the staleness window: unloaded once inflight reaches 0. */
  retired: boolean;
}

/** eos_token_id of generation_config.json (a number or a list), or none. */
export function stopTokenIds(modelDir: string | undefined): number[] {
  if (!modelDir) return [];
  const file = join(modelDir, 'generation_config.json');
  if (!existsSync(file)) return [];
  const eos = (JSON.parse(readFileSync(file, 'utf8')) as { eos_token_id?: number | number[] }).eos_token_id;
  return eos === undefined ? [] : Array.isArray(eos) ? eos : [eos];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class VllmBackend implements GenerationBackend {
  readonly name = 'vllm';
  readonly replicas: Replica[];
  private readonly s: z.output<typeof vllmSettingsSchema>;
  private readonly versions = new Map<number, Version>();
  private current: number | undefined;
  private readonly stopIds: number[];
  private readonly timer: NodeJS.Timeout;
  private probing = false;
  /** With sleep_during_updates, per replica: a replica found asleep is woken before a load. */
  private readonly sleepers = new Map<Replica, SleepClient>();

  constructor(
    settings: VllmSettings,
    private readonly log: (line: string) => void = () => undefined,
  ) {
    this.s = vllmSettingsSchema.parse(settings);
    const key = process.env[this.s.api_key_env];
    this.replicas = this.s.replicas.map((url) => new Replica(url, key, this.s));
    if (this.s.sleep_during_updates)
      for (const r of this.replicas) this.sleepers.set(r, new SleepClient(r.url, key, this.s.load_timeout_s * 1000));
    this.stopIds = stopTokenIds(this.s.model_dir);
    this.timer = setInterval(() => void this.probe(), this.s.health_interval_ms);
    this.timer.unref();
  }

  /** The model name loaded version N is served under. */
  modelName(version: number): string {
    const v = this.versions.get(version);
    if (!v) throw new Error(`vllm backend: policy version ${version} is not loaded`);
    return v.name;
  }

  /**
   * Loads policy version `version` from `dir` on every replica in rotation (a replica not yet
   * synced is tried too); resolves once at least one holds it. Replicas that cannot load it
   * leave rotation; none able to is an error naming each replica's reason.
   */
  async reload(dir: string, version?: number): Promise<void> {
    if (version === undefined) throw new Error(`vllm backend: loading ${dir} needs its policy version`);
    const name = `${this.s.lora_prefix ?? 'policy'}-v${version}-${manifestDigest(await verifyManifest(dir, version))}`;
    this.versions.set(version, { dir, name, inflight: 0, retired: false });
    const first = this.current === undefined;
    const targets = this.replicas.filter((r) => r.ready || (first && r.reason === 'not synced yet'));
    await Promise.all(targets.map((r) => this.loadOn(r, version)));
    if (!this.replicas.some((r) => r.ready && r.loaded.has(version))) {
      this.versions.delete(version);
      throw new Error(`policy version ${version} (${name} from ${dir}) could not be loaded on any replica: ${this.describeReplicas()}`);
    }
    this.current = version;
    this.log(
      `vllm: serving ${name} on ${this.replicas
        .filter((r) => r.ready)
        .map((r) => r.url)
        .join(', ')}`,
    );
    for (const [v, entry] of this.versions) {
      if (v < version - this.s.staleness && !entry.retired) {
        entry.retired = true;
        if (entry.inflight === 0) await this.unload(v);
      }
    }
  }

  async generate(requests: GenerationRequest[]): Promise<Generation[]> {
    return Promise.all(requests.map((r, i) => this.complete(r, i)));
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
  }

  private async complete(request: GenerationRequest, index: number): Promise<Generation> {
    const s = resolveSampling(request.sampling, `requests[${index}].sampling`);
    const version = request.policyVersion ?? this.current;
    if (version === undefined) throw new Error('vllm backend: no policy version is loaded yet');
    const entry = this.versions.get(version);
    if (!entry || (entry.retired && entry.inflight === 0 && version !== this.current)) {
      throw new Error(
        `vllm backend: policy version ${version} is not loaded (newest ${this.current}, staleness window ${this.s.staleness})`,
      );
    }
    const body = {
      model: entry.name,
      prompt: request.promptIds,
      max_tokens: s.max_tokens,
      temperature: s.temperature,
      top_p: s.top_p,
      top_k: 0,
      min_p: 0,
      repetition_penalty: 1,
      presence_penalty: 0,
      frequency_penalty: 0,
      ...(s.stop.length ? { stop: s.stop } : {}),
      ...(s.seed !== undefined ? { seed: s.seed } : {}),
      ...(this.stopIds.length ? { stop_token_ids: this.stopIds } : {}),
      logprobs: Math.max(1, s.top_logprobs),
      return_token_ids: true,
      return_tokens_as_token_ids: true,
      skip_special_tokens: false,
    };
    entry.inflight++;
    try {
      const failures: string[] = [];
      for (let attempt = 0; ; attempt++) {
        const replica = await this.pick(version, entry);
        replica.inflight++;
        try {
          const raw = await replica.client.post('/completions', body);
          const res = completionResponseSchema.extend({ model: z.string() }).safeParse(raw);
          if (!res.success) throw new Error(`${replica.url}: unexpected completion response: ${formatZodIssues(res.error)}`);
          if (res.data.model !== entry.name)
            throw new Error(`${replica.url} answered ${entry.name} (policy version ${version}) with model ${res.data.model}`);
          const gen = readCompletionChoice(res.data.choices[0], s, request.promptIds.length);
          // The replica stopped the generation itself (put to sleep, shutting down): not the model's answer.
          if (gen.finishReason === 'abort') throw new HttpError('the replica aborted the generation', undefined, true);
          return gen;
        } catch (e) {
          const err = e as Error;
          const status = e instanceof HttpError ? e.status : undefined;
          // 404: the replica lost the adapter (restarted); network errors, 5xx, 429: it is down or overloaded.
          const replicaFault = e instanceof HttpError && (status === 404 || e.retryable);
          if (!replicaFault) throw new Error(`policy version ${version}: ${err.message}`);
          failures.push(`${replica.url}: ${err.message}`);
          replica.out(`completion failed: ${err.message}`);
          this.log(`vllm: ${replica.url} out of rotation (policy version ${version}): ${err.message}`);
          if (attempt >= this.s.retries)
            throw new Error(`policy version ${version}: completion failed on ${attempt + 1} attempt(s): ${failures.join('; ')}`);
          await sleep(this.s.backoff_ms * 2 ** attempt);
        } finally {
          replica.inflight--;
        }
      }
    } finally {
      entry.inflight--;
      if (entry.retired && entry.inflight === 0) void this.unload(version);
    }
  }

  /** The least busy replica in rotation holding `version`; waits (up to the request timeout) while none does. */
  private async pick(version: number, entry: Version): Promise<Replica> {
    const deadline = Date.now() + this.s.request_timeout_s * 1000;
    for (;;) {
      const ok = this.replicas.filter((r) => r.ready && r.loaded.has(version));
      if (ok.length) return ok.reduce((a, b) => (b.inflight < a.inflight ? b : a));
      if (Date.now() > deadline)
        throw new Error(`policy version ${version} (${entry.name}): no replica in rotation holds it: ${this.describeReplicas()}`);
      await sleep(Math.min(200, this.s.health_interval_ms));
    }
  }

  /** Loads `version` on `replica` with retries; on success the replica is in rotation, otherwise out, with the reason. */
  private async loadOn(replica: Replica, version: number, join = true): Promise<boolean> {
    const v = this.versions.get(version)!;
    let last = '';
    for (let attempt = 0; attempt <= this.s.load_retries; attempt++) {
      try {
        // The train worker wakes the replicas after each update; one that it could not wake is woken here, before vLLM loads into memory it gave up.
        const sleeper = this.sleepers.get(replica);
        if (sleeper && (await sleeper.isSleeping())) {
          await sleeper.wakeUp();
          this.log(`vllm: ${replica.url} was asleep; woke it to load ${v.name}`);
        }
        await replica.load(v.name, v.dir, this.s.load_timeout_s * 1000);
        replica.loaded.add(version);
        if (join) {
          replica.ready = true;
          replica.reason = '';
        }
        return true;
      } catch (e) {
        last = (e as Error).message;
        if (attempt < this.s.load_retries) await sleep(this.s.backoff_ms * 2 ** attempt);
      }
    }
    replica.out(`loading policy version ${version} (${v.name} from ${v.dir}) failed after ${this.s.load_retries + 1} attempt(s): ${last}`);
    this.log(`vllm: ${replica.url} out of rotation: ${replica.reason}`);
    return false;
  }

  private async unload(version: number): Promise<void> {
    const v = this.versions.get(version);
    if (!v) return;
    this.versions.delete(version);
    await Promise.all(
      this.replicas
        .filter((r) => r.loaded.has(version))
        .map(async (r) => {
          r.loaded.delete(version);
          try {
            await r.unload(v.name, this.s.load_timeout_s * 1000);
          } catch (e) {
            this.log(`vllm: unloading ${v.name} (policy version ${version}) from ${r.url} failed: ${(e as Error).message}`);
          }
        }),
    );
  }

  /** Takes back replicas out of rotation that answer /health, once they hold the current version (and the older ones still in use). */
  private async probe(): Promise<void> {
    if (this.probing || this.current === undefined) return;
    this.probing = true;
    try {
      for (const r of this.replicas.filter((x) => !x.ready)) {
        if (!(await r.healthy(this.s.health_interval_ms))) continue;
        const wanted = [...this.versions].filter(([, e]) => !e.retired || e.inflight > 0).map(([v]) => v);
        let ok = true;
        for (const v of wanted.sort((a, b) => b - a)) {
          // Not in rotation until every wanted version is there.
          if (!(await this.loadOn(r, v, false))) {
            ok = false;
            break;
          }
        }
        if (ok) {
          r.ready = true;
          r.reason = '';
          this.log(`vllm: ${r.url} back in rotation with ${wanted.map((v) => this.modelName(v)).join(', ')}`);
        }
      }
    } finally {
      this.probing = false;
    }
  }

  private describeReplicas(): string {
    return this.replicas
      .map(
        (r) =>
          `${r.url} ${r.ready ? `holds ${[...r.loaded].map((v) => `v${v}`).join(', ') || 'nothing'}` : `out of rotation (${r.reason})`}`,
      )
      .join('; ');
  }
}
