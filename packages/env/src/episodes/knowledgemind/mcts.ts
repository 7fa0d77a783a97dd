/**
 * KnowledgeMind's Monte Carlo tree search over the fault mining tree (../shared/seeds/003,
 * Alg. 2), the arithmetic only: UCT selection, back propagation and the most-visited path.
 * Scores come from outside (the policy as verifier and simulator), so this stays pure.
 * UNSPEC choices: an unvisited node's UCT is +infinity; ties go to the first child in tree order.
 */

export interface MctsNode {
  service: string;
  parent?: MctsNode;
  children: MctsNode[];
  /** Visits N(v). */
  visits: number;
  /** Total reward Q(v). */
  value: number;
  /** The verifier's score when the node was mined (expansion), 0 before. */
  prior: number;
  /** Its children were mined (scored) already. */
  expanded: boolean;
}

export function node(service: string, parent?: MctsNode): MctsNode {
  const n: MctsNode = { service, children: [], visits: 0, value: 0, prior: 0, expanded: false };
  if (parent) {
    n.parent = parent;
    parent.children.push(n);
  }
  return n;
}

/** UCT(v) = Q/N + C * sqrt(ln N(parent) / N); +infinity while v is unvisited. */
export function uct(v: MctsNode, parentVisits: number, c: number): number {
  if (v.visits === 0) return Infinity;
  return v.value / v.visits + c * Math.sqrt(Math.log(Math.max(parentVisits, 1)) / v.visits);
}

/**
 * Selection: from the root, the child of largest UCT, until a node not yet expanded or a leaf.
 * Among equal UCT values (unvisited children are all +infinity) the verifier's higher score
 * wins, then tree order.
 */
export function select(root: MctsNode, c: number): MctsNode {
  let v = root;
  while (v.expanded && v.children.length > 0) {
    let best = v.children[0];
    let bestU = uct(best, v.visits, c);
    for (const ch of v.children.slice(1)) {
      const u = uct(ch, v.visits, c);
      if (u > bestU || (u === bestU && ch.prior > best.prior)) {
        best = ch;
        bestU = u;
      }
    }
    v = best;
  }
  return v;
}

/** Back propagation: N += 1 and Q += R from v up to the root. */
export function backpropagate(v: MctsNode, reward: number): void {
  for (let n: MctsNode | undefined = v; n; n = n.parent) {
    n.visits += 1;
    n.value += reward;
  }
}

/** The most-visited path from the root (root excluded): at each step the child visited most; ties to the higher Q, then tree order. */
export function mostVisitedPath(root: MctsNode): MctsNode[] {
  const path: MctsNode[] = [];
  let v = root;
  while (v.children.length > 0) {
    const visited = v.children.filter((c) => c.visits > 0);
    if (!visited.length) break;
    let best = visited[0];
    for (const ch of visited.slice(1)) if (ch.visits > best.visits || (ch.visits === best.visits && ch.value > best.value)) best = ch;
    path.push(best);
    v = best;
  }
  return path;
}
