/**
 * What the continuous-batching scheduler needs from a KV-cache layout: a prompt prefilled,
 * rows joining with it, every step adding one token to each running row, and rows leaving.
 * Two layouts exist: padded-cache.ts (the model's own graph, each row's whole cache) and
 * prefix-cache.ts (the decode graph, a prompt's key/values shared by its rows).
 */
import type * as ort from 'onnxruntime-node';
import type { KvGrowth } from './kv-growth';
import type { Row } from './rows';

/** A prompt run from an empty cache: its key/values per cache slot, [1, heads, len, headDim]. */
export interface Prefill {
  len: number;
  kv: ort.Tensor[];
}

/** A cached prompt's key/values to start a prefill from: its first `len` positions (prompt-cache.ts). */
export interface CachedPrefix {
  prefill: Prefill;
  len: number;
}

/** One generate() call: resolved when its last row is done. */
export interface Ticket {
  left: number;
  /** Its onToken threw: the call has failed, and its rows leave without the batch failing. */
  failed?: boolean;
  resolve(): void;
  reject(e: unknown): void;
}

export interface Entry {
  row: Row;
  ticket: Ticket;
}

export interface Member extends Entry {
  /** Tokens of this row in the cache: its prompt and the generated tokens already fed back. */
  len: number;
  /** Its prompt's prefill, shared by the rows that had the same prompt. */
  prefill: Prefill;
}

export interface BatchCache {
  /** The running rows, in the order step() returns their logits. */
  readonly members: readonly Member[];
  /**
   * Runs one prompt, from an empty cache or after the first `from.len` tokens of a cached prompt
   * it starts with: its last position's logits and its key/values (all prompt.length positions).
   * growth: where a chunked prefill's key/values grow, one per prompt (a layout whose graph joins
   * them itself ignores it).
   */
  prefill(prompt: number[], from?: CachedPrefix, growth?: KvGrowth): Promise<{ logits: Float32Array; prefill: Prefill }>;
  /** Adds rows whose prompts were just prefilled (len = prompt length). */
  join(entrants: Member[]): void;
  /** Feeds every running row's last token: one row of logits per member; each member's len grows by 1. */
  step(): Promise<Float32Array[]>;
  /** Keeps only these members (a subset, in members' order). */
  leave(keep: Member[]): void;
  clear(): void;
}
