/**
 * Continuous batching on the KV cache. Every generate() call of one loaded model hands its rows
 * to the same scheduler, which decodes all running rows as one batch, one token per row per
 * step: a row joins once its prompt is prefilled and leaves when it ends, so the episodes a
 * rollout worker plays at the same time share each forward pass.
 *
 * A prompt is prefilled alone (rows with the same prompt, as a GRPO group's samples, share that
 * prefill), in chunks ending at multiples of `prefillChunk` tokens, or taken from the cache of
 * recent prompts (prompt-cache.ts): as it ran before, or run from the cached chunks it starts
 * with; so a row's first token does not depend on its batch mates, and no token on what the
 * cache held. How the running rows' cache is laid out is the BatchCache's business: shared
 * prompt prefixes on the export's decode graph (prefix-cache.ts), else each row's whole cache,
 * padded (padded-cache.ts).
 */
import type { BatchCache, CachedPrefix, Entry, Member, Prefill, Ticket } from './batch-cache';
import { KvGrowth } from './kv-growth';
import { abortIfAsked, emitToken, type DecodeOptions, type Row } from './rows';
import { PromptCache } from './prompt-cache';
import { TokenSampler } from '../sampling';

export class DecodeScheduler {
  private pending: Entry[] = [];
  /** Taken from pending and being prefilled. */
  private joining: Entry[] = [];
  private driving = false;
  private readonly sampler = new TokenSampler();

  /** Recent prompts' key/values, which a prompt that starts like one of them prefills on; absent when off. */
  private readonly prompts?: PromptCache;

  constructor(
    private readonly cache: BatchCache,
    private readonly opts: DecodeOptions,
    /** Most rows decoded together; later rows wait for a place. */
    private readonly maxBatch: number,
    /** Prompt tokens run per prefill call: chunks end at multiples of it. */
    private readonly prefillChunk: number,
    /** Bytes of prompt key/values kept for later prompts that start alike; 0 keeps none. */
    promptCacheBytes: number,
  ) {
    if (promptCacheBytes > 0) this.prompts = new PromptCache(promptCacheBytes);
  }

  /** Decodes the rows (filling them in) beside whatever else runs; resolves once all are done. */
  run(rows: Row[]): Promise<void> {
    return new Promise((resolve, reject) => {
      if (rows.length === 0) return resolve();
      const ticket: Ticket = { left: rows.length, resolve, reject };
      for (const row of rows) this.pending.push({ row, ticket });
      if (!this.driving) {
        this.driving = true;
        // Calls made in the same turn of the event loop join the first step together.
        setImmediate(() => void this.drive());
      }
    });
  }

  private async drive(): Promise<void> {
    try {
      while (this.cache.members.length > 0 || this.pending.length > 0) {
        await this.admit();
        if (this.cache.members.length > 0) await this.step();
      }
    } catch (e) {
      this.fail(e);
    } finally {
      // No await between the loop's last check and this: a run() after it starts a new loop.
      this.driving = false;
    }
  }

  /** Prefills waiting rows while there is room and merges them into the running batch. */
  private async admit(): Promise<void> {
    for (const e of this.pending) {
      abortIfAsked(e.row);
      if (e.ticket.failed) e.row.done = true;
      if (e.row.done) settle(e);
    }
    this.pending = this.pending.filter((e) => !e.row.done);
    const room = this.maxBatch - this.cache.members.length;
    if (room <= 0 || this.pending.length === 0) return;
    this.joining = this.pending.splice(0, room);
    const byPrompt = new Map<string, Entry[]>();
    for (const e of this.joining) {
      const key = e.row.promptIds.join(',');
      byPrompt.set(key, [...(byPrompt.get(key) ?? []), e]);
    }
    const entrants: Member[] = [];
    for (const group of byPrompt.values()) {
      const { logits, prefill } = await this.prefill(group[0].row.promptIds);
      for (const e of group) {
        emit(e, logits, this.sampler, this.opts);
        if (e.row.done) settle(e);
        else entrants.push({ ...e, len: prefill.len, prefill });
      }
    }
    if (entrants.length > 0) this.cache.join(entrants);
    this.joining = [];
  }

  /**
   * A prompt's logits and key/values: from the prompt cache when it ran before, else run chunk by
   * chunk, from the cached chunks it starts with where there are some.
   */
  private async prefill(prompt: number[]): Promise<{ logits: Float32Array; prefill: Prefill }> {
    const chunk = this.prefillChunk;
    const hit = this.prompts?.lookup(prompt, chunk);
    if (hit?.kind === 'same') return hit;
    const out = await prefillInChunks(this.cache, prompt, chunk, hit?.from);
    this.prompts?.add(prompt, out.prefill, out.logits);
    return out;
  }

  /** One token for every running row on top of the cache; finished rows leave. */
  private async step(): Promise<void> {
    const logits = await this.cache.step();
    const rows = this.cache.members;
    rows.forEach((r, i) => emit(r, logits[i], this.sampler, this.opts));
    const keep = rows.filter((r) => !r.row.done);
    for (const r of rows) if (r.row.done) settle(r);
    if (keep.length < rows.length) this.cache.leave(keep);
  }

  /** A failed run fails every call waiting on this scheduler; the next call starts afresh. */
  private fail(e: unknown): void {
    for (const entry of [...this.cache.members, ...this.joining, ...this.pending]) entry.ticket.reject(e);
    this.cache.clear();
    this.joining = [];
    this.pending = [];
  }
}

/**
 * Runs a non-empty prompt on `cache` in chunks that end at multiples of `chunk` (and at its end),
 * each on the last one's key/values, from `from` (a whole number of chunks short of the prompt's
 * end) when given: its last position's logits and all its key/values.
 */
export async function prefillInChunks(
  cache: Pick<BatchCache, 'prefill'>,
  prompt: number[],
  chunk: number,
  from?: CachedPrefix,
): Promise<{ logits: Float32Array; prefill: Prefill }> {
  const growth = new KvGrowth(prompt.length);
  for (;;) {
    const end = Math.min(prompt.length, (Math.floor((from?.len ?? 0) / chunk) + 1) * chunk);
    const out = await cache.prefill(prompt.slice(0, end), from, growth);
    if (end === prompt.length) return out;
    from = { prefill: out.prefill, len: end };
  }
}

function settle(e: Entry): void {
  if (--e.ticket.left === 0) e.ticket.resolve();
}

/** emitToken for one row; a throwing onToken fails that row's call only. */
function emit(e: Entry, logits: Float32Array, sampler: TokenSampler, opts: DecodeOptions): void {
  if (e.ticket.failed) {
    e.row.done = true;
    return;
  }
  try {
    emitToken(e.row, logits, sampler, opts);
  } catch (err) {
    e.row.done = true;
    e.ticket.failed = true;
    e.ticket.reject(err);
  }
}
