/**
 * How a GRPO group's samples are made, by name (grpo.groups: { kind, ...settings }). Adding a
 * kind is adding its file, its entry in KINDS and its schema in config/sections/groups.ts.
 */
import { branchGroups } from './branch';
import { episodeGroups } from './episode';
import type { GroupKind } from './types';

const KINDS = [episodeGroups, branchGroups] as const;

export function groupKind(name: string): GroupKind {
  const k = KINDS.find((x) => x.name === name);
  if (!k) throw new Error(`grpo.groups.kind: unknown group kind ${JSON.stringify(name)} (known: ${KINDS.map((x) => x.name).join(', ')})`);
  return k as unknown as GroupKind;
}
