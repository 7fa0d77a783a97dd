/**
 * The KV cache of the decode graph (decode.onnx, engine/thinkfl_engine/onnx_decode.py):
 * a prompt's key/values are held once for all the rows that share it (a GRPO group's
 * samples) and each row keeps only its generated tokens' own. The batch is G groups x R row
 * slots; a step reads each group's prefix once, so rows of one prompt cost little more than
 * one row, where a whole-cache graph reads (and copies) the prompt's cache once per row.
 *
 * A prompt is prefilled on the same graph (one row, empty suffix, the prompt as its new tokens;
 * the prefix empty, or a cached prompt's key/values it starts with, prompt-cache.ts), and its
 * key/values become the group's prefix.
 *
 * The graph returns only the step's new key/values, which are written into each row's suffix
 * buffer in place: nothing proportional to the context crosses into JavaScript per step. Suffixes
 * are laid out as the graph attends them, [G, heads, R, capacity, headDim]: a group's rows side
 * by side under each head. The
 * prefixes and suffixes are rebuilt (copied) only when rows join, a group ends, or a suffix
 * outgrows its capacity. Unused positions and empty slots are masked with -inf; an empty
 * slot still computes (on its group's prefix) and its logits are ignored.
 */
import * as ort from 'onnxruntime-node';
import type { BatchCache, CachedPrefix, Member, Prefill } from './batch-cache';
import { logitsOf, type DecodeGraph } from './model';
import { KvGrowth } from './kv-growth';
import { leadingPositions } from './prompt-cache';

/** Suffix positions added at a time when a row's generated tokens outgrow the buffer. */
const SUFFIX_CHUNK = 32;

export class SharedPrefixCache implements BatchCache {
  members: Member[] = [];
  /** Prefills of the running groups, in slot order: group g holds slots g*R .. g*R+R-1. */
  private groups: Prefill[] = [];
  private perGroup = 0;
  private slotOf = new Map<Member, number>();
  /** Per cache slot, [G, heads, width, headDim], and the mask [G, width]. */
  private prefix: ort.Tensor[] = [];
  private prefixMask?: ort.Tensor;
  /** Per cache slot, [G, heads, R, capacity, headDim], and the mask [G*R, capacity]. */
  private suffix: Float32Array[] = [];
  private suffixMask = new Float32Array(0);
  private capacity = 0;

  constructor(
    private readonly graph: DecodeGraph,
    private readonly padId: number,
  ) {}

  async prefill(prompt: number[], from?: CachedPrefix, growth?: KvGrowth): Promise<{ logits: Float32Array; prefill: Prefill }> {
    const g = this.graph;
    const p = from?.len ?? 0;
    const fresh = prompt.slice(p);
    // Nothing cached: one prefix and one suffix position, both masked. The suffix always is.
    const empty = (name: string, dims: number[]) =>
      [name, new ort.Tensor('float32', new Float32Array(g.kvHeads * g.headDim), dims)] as const;
    const cached = from ? from.prefill.kv.map((kv) => leadingPositions(kv, p)) : undefined;
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor('int64', BigInt64Array.from(fresh, BigInt), [1, fresh.length]),
      position_ids: new ort.Tensor(
        'int64',
        BigInt64Array.from(fresh, (_, i) => BigInt(p + i)),
        [1, fresh.length],
      ),
      prefix_mask: cached
        ? new ort.Tensor('float32', new Float32Array(p), [1, p])
        : new ort.Tensor('float32', Float32Array.of(-Infinity), [1, 1]),
      suffix_mask: new ort.Tensor('float32', Float32Array.of(-Infinity), [1, 1]),
      ...Object.fromEntries(g.suffix.map((name) => empty(name, [1, g.kvHeads, 1, 1, g.headDim]))),
      ...Object.fromEntries(g.prefix.map((name, c) => (cached ? [name, cached[c]] : empty(name, [1, g.kvHeads, 1, g.headDim])))),
    };
    const result = await g.session.run(feeds, ['logits', ...g.fresh]);
    const grow = growth ?? new KvGrowth(prompt.length);
    // One group of one row: [1, heads, 1, T, headDim] is a prefix's [1, heads, T, headDim].
    const asPrefix = (t: ort.Tensor) => new ort.Tensor('float32', t.data as Float32Array, [1, g.kvHeads, fresh.length, g.headDim]);
    const kv = g.fresh.map((name, c) => (cached ? grow.append(c, cached[c], asPrefix(result[name])) : asPrefix(result[name])));
    return { logits: logitsOf(result, g.path).data as Float32Array, prefill: { len: prompt.length, kv } };
  }

  join(entrants: Member[]): void {
    this.layout([...this.members, ...entrants]);
  }

  async step(): Promise<Float32Array[]> {
    const { kvHeads: heads, headDim: dim } = this.graph;
    const cap = this.capacity;
    const n = this.groups.length * this.perGroup;
    const ids = new BigInt64Array(n).fill(BigInt(this.padId));
    const positions = new BigInt64Array(n);
    for (const m of this.members) {
      const s = this.slotOf.get(m)!;
      ids[s] = BigInt(m.row.out[m.row.out.length - 1]);
      positions[s] = BigInt(m.len);
    }
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor('int64', ids, [n, 1]),
      position_ids: new ort.Tensor('int64', positions, [n, 1]),
      prefix_mask: this.prefixMask!,
      suffix_mask: new ort.Tensor('float32', this.suffixMask, [n, cap]),
    };
    this.graph.prefix.forEach((name, c) => (feeds[name] = this.prefix[c]));
    const groups = this.groups.length;
    const r = this.perGroup;
    this.graph.suffix.forEach((name, c) => (feeds[name] = new ort.Tensor('float32', this.suffix[c], [groups, heads, r, cap, dim])));
    const result = await this.graph.session.run(feeds, ['logits', ...this.graph.fresh]);
    const logits = logitsOf(result, this.graph.path);
    const v = logits.dims[1];
    const data = logits.data as Float32Array;
    const fresh = this.graph.fresh.map((name) => result[name].data as Float32Array);
    const out = this.members.map((m) => {
      const s = this.slotOf.get(m)!;
      const at = m.len - m.prefill.len;
      fresh.forEach((src, c) => {
        for (let h = 0; h < heads; h++) {
          const row = this.headRow(s, h, r);
          this.suffix[c].set(src.subarray(row * dim, (row + 1) * dim), (row * cap + at) * dim);
        }
      });
      this.suffixMask[s * cap + at] = 0;
      m.len++;
      return data.subarray(s * v, (s + 1) * v);
    });
    if (this.members.some((m) => m.len - m.prefill.len >= cap)) this.layout(this.members);
    return out;
  }

  leave(keep: Member[]): void {
    if (keep.length === 0) {
      this.clear();
      return;
    }
    const live = new Set(keep.map((m) => m.prefill));
    if (this.groups.some((g) => !live.has(g))) {
      this.layout(keep);
      return;
    }
    // Every group still runs: the leavers' slots stay in place, computed and ignored, until the next layout.
    const kept = new Set(keep);
    for (const m of this.members) if (!kept.has(m)) this.slotOf.delete(m);
    this.members = keep;
  }

  clear(): void {
    this.members = [];
    this.groups = [];
    this.perGroup = 0;
    this.slotOf = new Map();
    this.prefix = [];
    this.prefixMask = undefined;
    this.suffix = [];
    this.suffixMask = new Float32Array(0);
    this.capacity = 0;
  }

  /** Lays the members out in slots, group by group; copies each row's suffix and, if the groups changed, the prefixes. */
  private layout(members: Member[]): void {
    const byGroup = new Map<Prefill, Member[]>();
    for (const m of members) byGroup.set(m.prefill, [...(byGroup.get(m.prefill) ?? []), m]);
    const groups = [...byGroup.keys()];
    if (groups.length !== this.groups.length || groups.some((g, i) => g !== this.groups[i])) this.setPrefixes(groups);
    const perGroup = Math.max(...[...byGroup.values()].map((l) => l.length));
    const longest = Math.max(...members.map((m) => m.len - m.prefill.len));
    const cap = SUFFIX_CHUNK * (Math.floor(longest / SUFFIX_CHUNK) + 1);
    const { kvHeads: heads, headDim: dim } = this.graph;
    const n = groups.length * perGroup;
    const suffix = this.graph.suffix.map(() => new Float32Array(n * heads * cap * dim));
    const mask = new Float32Array(n * cap).fill(-Infinity);
    const slotOf = new Map<Member, number>();
    groups.forEach((g, gi) =>
      byGroup.get(g)!.forEach((m, i) => {
        const slot = gi * perGroup + i;
        const len = m.len - m.prefill.len;
        const old = this.slotOf.get(m);
        slotOf.set(m, slot);
        mask.fill(0, slot * cap, slot * cap + len);
        if (old === undefined || len === 0) return;
        suffix.forEach((dst, c) => {
          for (let h = 0; h < heads; h++) {
            const from = this.headRow(old, h, this.perGroup) * this.capacity * dim;
            dst.set(this.suffix[c].subarray(from, from + len * dim), this.headRow(slot, h, perGroup) * cap * dim);
          }
        });
      }),
    );
    this.members = members;
    this.perGroup = perGroup;
    this.slotOf = slotOf;
    this.suffix = suffix;
    this.suffixMask = mask;
    this.capacity = cap;
  }

  /** Where slot `slot`'s head `h` is among the [G, heads, R] rows of a suffix laid out with R rows a group. */
  private headRow(slot: number, h: number, r: number): number {
    const heads = this.graph.kvHeads;
    return (Math.floor(slot / r) * heads + h) * r + (slot % r);
  }

  /** The groups' prompt key/values side by side, padded to the longest prompt; one group's are used as they are. */
  private setPrefixes(groups: Prefill[]): void {
    const width = Math.max(...groups.map((g) => g.len));
    const mask = new Float32Array(groups.length * width);
    groups.forEach((g, gi) => mask.fill(-Infinity, gi * width + g.len, (gi + 1) * width));
    this.prefixMask = new ort.Tensor('float32', mask, [groups.length, width]);
    const { kvHeads: heads, headDim: dim } = this.graph;
    this.prefix =
      groups.length === 1
        ? groups[0].kv
        : this.graph.prefix.map((_, c) => {
            const dst = new Float32Array(groups.length * heads * width * dim);
            groups.forEach((g, gi) => {
              const src = g.kv[c].data as Float32Array;
              for (let h = 0; h < heads; h++) dst.set(src.subarray(h * g.len * dim, (h + 1) * g.len * dim), (gi * heads + h) * width * dim);
            });
            return new ort.Tensor('float32', dst, [groups.length, heads, width, dim]);
          });
    this.groups = groups;
  }
}
