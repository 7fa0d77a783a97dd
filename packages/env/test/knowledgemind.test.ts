/** KnowledgeMind's search: hand-computed UCT, back propagation, most-visited path; the tree; the protocol. */
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureNezhaDataset } from '../../../testkit/nezha';
import { loadDataset } from '../src/datasets/index';
import { alarmGraph } from '../src/episodes/knowledgemind/alarms';
import { jaccard } from '../src/episodes/knowledgemind/knowledge';
import { backpropagate, mostVisitedPath, node, select, uct } from '../src/episodes/knowledgemind/mcts';
import { faultMiningTree } from '../src/episodes/knowledgemind/tree';
import { ReplayPolicy, runEpisode } from '../src/episodes/index';
import { rescale } from '../src/policies/knowledgemind-script';
import type { Dataset } from '../src/types';
import { toolCallText } from '../../../testkit/tool-calls';

describe('MCTS arithmetic (Alg. 2)', () => {
  it('UCT = Q/N + C sqrt(ln N(parent) / N), +infinity unvisited', () => {
    const root = node('r');
    const a = node('a', root);
    a.visits = 2;
    a.value = 1;
    // 1/2 + sqrt(2) * sqrt(ln 4 / 2) = 0.5 + sqrt(ln 4) = 0.5 + 1.177410022515475
    expect(uct(a, 4, Math.SQRT2)).toBeCloseTo(1.677410022515475, 12);
    // C = 1: 0.5 + sqrt(1.3862943611198906 / 2) = 0.5 + 0.8325546111576977
    expect(uct(a, 4, 1)).toBeCloseTo(1.332554611157698, 12);
    expect(uct(node('b', root), 4, 1)).toBe(Infinity);
  });

  it('back propagation adds 1 visit and R to every node up to the root', () => {
    const root = node('r');
    const a = node('a', root);
    const b = node('b', a);
    backpropagate(b, 0.7);
    backpropagate(a, 0.2);
    expect([root.visits, a.visits, b.visits]).toEqual([2, 2, 1]);
    expect([root.value, a.value, b.value].map((v) => +v.toFixed(12))).toEqual([0.9, 0.9, 0.7]);
  });

  it('selection descends by UCT to an unexpanded node; unvisited children first, the higher verifier score first', () => {
    const root = node('r');
    const a = node('a', root);
    const b = node('b', root);
    const c = node('c', root);
    root.expanded = true;
    a.prior = 3;
    b.prior = 7;
    c.prior = 7;
    expect(select(root, 1).service).toBe('b');
    // a: Q/N = 0.9/1 + sqrt(ln 3 / 1) = 0.9 + 1.0481470; b: 0.2/1 + 1.0481470; c unvisited
    root.visits = 3;
    a.visits = 1;
    a.value = 0.9;
    b.visits = 1;
    b.value = 0.2;
    expect(select(root, 1).service).toBe('c');
    c.visits = 1;
    c.value = 0.5;
    expect(select(root, 1).service).toBe('a');
    // With C = 0 exploitation only; a is expanded with a child: descend to it.
    a.expanded = true;
    const a1 = node('a1', a);
    expect(select(root, 0)).toBe(a1);
  });

  it('the most-visited path follows the largest N, ties to the larger Q', () => {
    const root = node('r');
    const a = node('a', root);
    const b = node('b', root);
    const a1 = node('a1', a);
    const a2 = node('a2', a);
    for (const [n, r] of [
      [a1, 0.1],
      [a1, 0.1],
      [a2, 0.9],
      [a2, 0.9],
      [b, 1],
      [b, 1],
      [b, 1],
    ] as const)
      backpropagate(n, r);
    // a: N 4, b: N 3 -> a; a1 and a2 both N 2, a2 has Q 1.8 -> a2
    expect(mostVisitedPath(root).map((n) => n.service)).toEqual(['a', 'a2']);
  });

  it('verifier scores rescale to 1..8 with the top two apart', () => {
    expect(rescale([0, 7, 14])).toEqual([1, 5, 8]);
    expect(rescale([10, 9, 0])).toEqual([8, 6, 1]);
    expect(rescale([3, 3])).toEqual([1, 1]);
  });

  it('Jaccard over alarm sets', () => {
    expect(jaccard(new Set(['a', 'b']), new Set(['b', 'c']))).toBeCloseTo(1 / 3, 12);
    expect(jaccard(new Set(['a']), new Set(['a']))).toBe(1);
  });
});

describe('alarm graph and fault mining tree (Alg. 1)', () => {
  it('keeps alarmed services and their callers within the request, callers above callees', () => {
    // gw -> a -> b, gw -> c; x -> b (x not in the request); b alarmed, c alarmed
    const dep = new Map([
      ['gw', new Set(['a', 'c'])],
      ['a', new Set(['b'])],
      ['x', new Set(['b'])],
    ]);
    const g = alarmGraph(dep, new Set(['b', 'c']), new Set(['gw', 'a', 'b', 'c', 'd']));
    // G' = {b, c, a, gw, x}; ∩ N drops x (and d is not in G')
    expect([...g.services].sort()).toEqual(['a', 'b', 'c', 'gw']);
    const tree = faultMiningTree(g.services, g.edges);
    expect(tree.children.map((n) => n.service)).toEqual(['gw']);
    expect(tree.children[0].children.map((n) => n.service)).toEqual(['a', 'c']);
    expect(tree.children[0].children[0].children.map((n) => n.service)).toEqual(['b']);
  });
});

describe('knowledgemind protocol with a replayed policy', () => {
  let ds: Dataset;
  beforeAll(async () => {
    ds = await loadDataset(await ensureNezhaDataset());
  });

  it('asks for expansion and simulation scores through tools, then the answer at the most-visited end', async () => {
    const kase = ds.cases[0];
    const seen: unknown[] = [];
    const replay = new ReplayPolicy([
      // Scores naming unknown services default the real candidates to 1; invalid turns count as score 1.
      toolCallText('score_services', { scores: { 'no-such-service': 9 } }),
      'not a call',
      toolCallText('print_results', { root_causes: [{ pod: kase.truth.pod, type: 'exception' }] }),
    ]);
    const policy = {
      name: 'spy',
      next: async (ctx: Parameters<ReplayPolicy['next']>[0]) => (seen.push(ctx.environment), replay.next(ctx)),
    };
    const ep = await runEpisode({
      dataset: ds,
      case: kase,
      policy,
      protocol: 'knowledgemind',
      settings: { knowledgemind: { simulations: 1 } },
    });
    expect(ep.stop_reason).toBe('answered');
    expect(ep.answer).toEqual([{ pod: kase.truth.pod, type: 'exception' }]);
    expect((seen[0] as { kind: string }).kind).toBe('expand');
    expect((seen[1] as { kind: string }).kind).toBe('simulate');
    expect((seen.at(-1) as { kind: string }).kind).toBe('final');
    expect(ep.tool_calls.map((c) => c.name)).toEqual(['score_services', 'print_results']);
    expect(ep.parse_errors).toHaveLength(1);
  });
});
