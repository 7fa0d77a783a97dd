/**
 * The fault mining tree (../shared/seeds/003, Alg. 1): the alarm graph split into service-level
 * sub-trees, callers above callees, hung below a virtual root. A service appears once, under
 * the first caller that reaches it (services in order, callees in order); services only on a
 * cycle hang from the root.
 */
import { node, type MctsNode } from './mcts';

export const VIRTUAL_ROOT = 'virtual_root';

export function faultMiningTree(services: Set<string>, edges: Map<string, string[]>): MctsNode {
  const root = node(VIRTUAL_ROOT);
  const called = new Set<string>();
  for (const tos of edges.values()) for (const t of tos) called.add(t);
  const placed = new Set<string>();
  const grow = (parent: MctsNode, service: string): void => {
    placed.add(service);
    const n = node(service, parent);
    for (const t of edges.get(service) ?? []) if (!placed.has(t)) grow(n, t);
  };
  const order = [...services].sort();
  for (const s of order) if (!called.has(s) && !placed.has(s)) grow(root, s);
  for (const s of order) if (!placed.has(s)) grow(root, s);
  return root;
}
