/**
 * Personalised PageRank over MicroRank's graph: operation nodes linked by calls
 * (caller -> callee), and one node per trace linked both ways to the operations it covers.
 * The restart vector is uniform over the trace nodes, so operations that many of the given
 * traces pass through, and that sit below them in the call graph, gather weight.
 */

export interface TraceGraph {
  /** Number of operation nodes. */
  ops: number;
  /** Distinct caller -> callee edges between operations. */
  calls: [number, number][];
  /** For each trace, the distinct operations it covers. */
  coverage: number[][];
}

/** Weight of each operation node (the trace nodes' share is dropped), summing to at most 1. */
export function personalizedPageRank(g: TraceGraph, damping = 0.85, iterations = 30): Float64Array {
  const n = g.ops + g.coverage.length;
  const out: number[][] = Array.from({ length: n }, () => []);
  for (const [a, b] of g.calls) out[a].push(b);
  g.coverage.forEach((ops, t) => {
    for (const o of ops) {
      out[g.ops + t].push(o);
      out[o].push(g.ops + t);
    }
  });
  const restart = new Float64Array(n);
  if (g.coverage.length) for (let t = 0; t < g.coverage.length; t++) restart[g.ops + t] = 1 / g.coverage.length;
  else restart.fill(1 / Math.max(n, 1));

  let r = Float64Array.from(restart);
  for (let it = 0; it < iterations; it++) {
    const next = new Float64Array(n);
    let dangling = 0;
    for (let i = 0; i < n; i++) {
      if (!out[i].length) {
        dangling += r[i];
        continue;
      }
      const share = r[i] / out[i].length;
      for (const j of out[i]) next[j] += share;
    }
    for (let i = 0; i < n; i++) next[i] = (1 - damping) * restart[i] + damping * (next[i] + dangling * restart[i]);
    r = next;
  }
  return r.subarray(0, g.ops);
}
