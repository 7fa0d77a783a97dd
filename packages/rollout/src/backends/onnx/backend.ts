/**
 * The `onnx` backend: onnxruntime-node in process. Holds one loaded policy version at a time;
 * reload() builds the next session first and swaps it in between requests, and the old
 * session is released once the requests that started on it have finished. With a KV cache,
 * the rows of all concurrent generate() calls on a version decode as one batch (scheduler.ts):
 * on the export's decode graph (onnx/decode.onnx) when it has one, which alone is loaded,
 * else on the model graph.
 */
import { z } from 'zod';
import { generateUncached } from './generate';
import {
  decodeGraphPath,
  loadDecodeGraph,
  loadOnnxCausalLM,
  locateOnnx,
  readModelConfig,
  type ModelConfig,
  type OnnxCausalLM,
} from './model';
import { PaddedCache } from './padded-cache';
import { SharedPrefixCache } from './prefix-cache';
import { startRow, toGeneration, type DecodeOptions } from './rows';
import { DecodeScheduler } from './scheduler';
import { randomSeed } from '@thinkfl/env';
import { resolveSampling, type Generation, type GenerationBackend, type GenerationRequest } from '../types';

export const onnxSettingsSchema = z
  .object({
    /** Hugging Face model directory: config.json, tokenizer files, onnx/model.onnx (or model.onnx), and onnx/decode.onnx where the trainer exported one (decoded on when present). */
    model_dir: z
      .string()
      .min(1)
      .describe(
        'Hugging Face model directory: config.json, tokenizer files, onnx/model.onnx (or model.onnx), and onnx/decode.onnx where the trainer exported one (decoded on when present).',
      ),
    /** Use the export's KV cache when it has one ('auto'), or recompute every step ('off'). Default 'auto'. */
    kv_cache: z
      .enum(['auto', 'off'])
      .default('auto')
      .describe("Use the export's KV cache when it has one ('auto'), or recompute every step ('off'). Default 'auto'."),
    /** onnxruntime intra-op threads; 0 lets onnxruntime choose (all cores). Default 0. */
    threads: z.number().int().min(0).default(0).describe('onnxruntime intra-op threads; 0 lets onnxruntime choose (all cores). Default 0.'),
    /**
     * Let onnxruntime's intra-op threads spin-wait for work between operators (onnxruntime's own
     * default) instead of sleeping. Off by default: the backend shares its cores with the train
     * engine and other workers, and a spinning pool thread that the OS deschedules stalls every
     * decode step it joins (batch-1 decode of the tiny model on 2 loaded cores: 1.1 ms a step
     * with it off, 11-24 ms with it on; docs/experiments.md). On for a backend with cores of its own.
     */
    spin: z
      .boolean()
      .default(false)
      .describe(
        "Let onnxruntime's intra-op threads spin-wait between operators (its own default) instead of sleeping. Off: the backend " +
          'shares cores with the train engine and other workers, where a descheduled spinning thread stalls each decode step. Default false.',
      ),
    /**
     * Most rows decoded together, over all concurrent requests (a rollout worker's episodes);
     * further rows wait for a running one to end. Default 8.
     */
    max_batch: z
      .number()
      .int()
      .positive()
      .default(8)
      .describe(
        "Most rows decoded together, over all concurrent requests (a rollout worker's episodes); further rows wait for a running one to end. Default 8.",
      ),
    /**
     * Prompt tokens run per prefill call: a prompt is always prefilled in chunks that end at
     * multiples of this, and the prompt cache reuses only whole chunks, so a prompt's key/values
     * (and the tokens sampled on them) are the same bits whatever the cache held: a resumed run
     * samples what the unbroken one did (issue 29). Chunks cost no time on CPU: on the tiny-cpu
     * model with 1 thread, chunks of 64 took 0.83-1.01x a whole prefill of 600-3,000 tokens; smaller
     * chunks reuse more of a cached prompt, and with the cache a GRPO step's rollouts took 0.32x and
     * 0.39x the time of whole prompts without it at 64, 0.41x and 0.48x at 128, and 0.41x and 0.55x
     * at 32 (scripts/bench/prefill-chunks.ts and rollout-prefill.ts, docs/experiments.md). Default
     * 64 (vLLM's prefix cache likewise reuses whole blocks, of 16).
     */
    prefill_chunk: z
      .number()
      .int()
      .positive()
      .default(64)
      .describe(
        'Prompt tokens run per prefill call: prompts are prefilled in chunks ending at multiples of this and the prompt cache ' +
          'reuses whole chunks only, so what is sampled does not depend on what the cache held. Default 64.',
      ),
    /**
     * MiB of recent prompts' key/values kept per policy version, so that a prompt starting like
     * one of them (an episode's next turn, a case's shared system prompt) prefills only its new
     * chunks (prefill_chunk); least recently used prompts leave first (float32 key/values: 3 KiB
     * a token for the tiny-cpu model, 24 KiB for Qwen2.5-0.5B; 256 holds a tiny-cpu GRPO step).
     * It changes what runs, never what is sampled. 0 turns it off. Default 256.
     */
    prompt_cache_mb: z
      .number()
      .min(0)
      .default(256)
      .describe(
        "MiB of recent prompts' key/values kept per policy version, so that a prompt starting like one of them (an episode's next " +
          'turn, a shared system prompt) prefills only its new chunks; least recently used leave first. Changes what runs, not ' +
          'what is sampled. 0 turns it off. Default 256.',
      ),
  })
  .strict();

export type OnnxSettings = z.input<typeof onnxSettingsSchema>;

/** Turns generated token ids into text; the model directory's tokenizer provides it. */
export interface Detokenizer {
  decode(ids: number[]): string;
  /** End-of-sequence ids the tokenizer knows besides config.json's (e.g. its eos_token). */
  eosIds?: number[];
}

interface Loaded {
  /** The graph generation runs on: decode.onnx, or the model graph. */
  graphPath: string;
  config: ModelConfig;
  modelDir: string;
  version: number;
  opts: DecodeOptions;
  /** Decodes with a KV cache; absent when the export has none or kvCache is 'off'. */
  scheduler?: DecodeScheduler;
  /** The model graph, run on the whole sequence every step, when there is no scheduler. */
  uncached?: OnnxCausalLM;
  release(): Promise<void>;
  running: number;
  retired: boolean;
}

export class OnnxBackend implements GenerationBackend {
  readonly name = 'onnx';
  private current: Loaded;
  private readonly settings: z.output<typeof onnxSettingsSchema>;

  private constructor(
    loaded: Loaded,
    settings: z.output<typeof onnxSettingsSchema>,
    private detokenizer: Detokenizer,
  ) {
    this.current = loaded;
    this.settings = settings;
  }

  static async create(settings: OnnxSettings, detokenizer: Detokenizer): Promise<OnnxBackend> {
    const s = onnxSettingsSchema.parse(settings);
    return new OnnxBackend(await load(s, s.model_dir, 1, detokenizer), s, detokenizer);
  }

  /** The model directory and policy version new requests run on. */
  get info(): { modelDir: string; onnxPath: string; version: number; kvCache: boolean } {
    const c = this.current;
    return { modelDir: c.modelDir, onnxPath: c.graphPath, version: c.version, kvCache: c.scheduler !== undefined };
  }

  /** Ids that end generation: config.json / generation_config.json's and the tokenizer's. */
  get eosIds(): number[] {
    return [...new Set([...this.current.config.eosIds, ...(this.detokenizer.eosIds ?? [])])];
  }

  async generate(requests: GenerationRequest[]): Promise<Generation[]> {
    const rows = requests.map((r, i) => {
      const sampling = resolveSampling(r.sampling, `requests[${i}].sampling`);
      return { promptIds: r.promptIds, sampling, seed: sampling.seed ?? randomSeed(), signal: r.signal, onToken: r.onToken };
    });
    const loaded = this.current;
    loaded.running++;
    try {
      const started = rows.map((r, i) => startRow(r, i, loaded.config));
      if (loaded.scheduler) await loaded.scheduler.run(started);
      else {
        for (let i = 0; i < started.length; i += this.settings.max_batch) {
          await generateUncached(loaded.uncached!, started.slice(i, i + this.settings.max_batch), loaded.opts);
        }
      }
      return started.map((r) => toGeneration(r, loaded.opts));
    } finally {
      loaded.running--;
      if (loaded.retired && loaded.running === 0) await loaded.release();
    }
  }

  /**
   * Loads a new policy version (numbered `version`, else the next) from a model directory or
   * an .onnx file (which keeps the current tokenizer); a new tokenizer may come with a new
   * model directory.
   */
  async reload(source: string, version?: number, detokenizer?: Detokenizer): Promise<void> {
    const next = await load(this.settings, source, version ?? this.current.version + 1, detokenizer ?? this.detokenizer);
    const old = this.current;
    this.current = next;
    if (detokenizer) this.detokenizer = detokenizer;
    old.retired = true;
    if (old.running === 0) await old.release();
  }

  async close(): Promise<void> {
    const c = this.current;
    c.retired = true;
    if (c.running === 0) await c.release();
  }
}

async function load(
  settings: z.output<typeof onnxSettingsSchema>,
  source: string,
  version: number,
  detokenizer: Detokenizer,
): Promise<Loaded> {
  const { onnxPath, modelDir } = locateOnnx(source);
  const config = readModelConfig(modelDir);
  const opts: DecodeOptions = {
    eosIds: new Set([...config.eosIds, ...(detokenizer.eosIds ?? [])]),
    padId: config.padId,
    decode: (ids) => detokenizer.decode(ids),
  };
  const base = { config, modelDir, version, opts, running: 0, retired: false };
  const session = { threads: settings.threads, spin: settings.spin };
  const promptCacheBytes = Math.floor(settings.prompt_cache_mb * 2 ** 20);
  const decodePath = settings.kv_cache === 'auto' ? decodeGraphPath(onnxPath) : undefined;
  if (decodePath) {
    const graph = await loadDecodeGraph(decodePath, config, session);
    const scheduler = new DecodeScheduler(
      new SharedPrefixCache(graph, config.padId),
      opts,
      settings.max_batch,
      settings.prefill_chunk,
      promptCacheBytes,
    );
    return { ...base, graphPath: decodePath, scheduler, release: () => graph.session.release() };
  }
  const model = await loadOnnxCausalLM(onnxPath, config, session);
  const release = () => model.session.release();
  if (settings.kv_cache === 'auto' && model.cache.length > 0) {
    const scheduler = new DecodeScheduler(new PaddedCache(model), opts, settings.max_batch, settings.prefill_chunk, promptCacheBytes);
    return { ...base, graphPath: onnxPath, scheduler, release };
  }
  return { ...base, graphPath: onnxPath, uncached: model, release };
}
