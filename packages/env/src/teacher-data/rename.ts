/**
 * Consistent renaming of teacher conversations: every service name of the topology is replaced
 * by another by one random permutation, everywhere in the conversation (prompt, tool results,
 * calls, answer), and each pod name by a pod of the new service (a real pod name: the tiny
 * model's tokenizer has one token per pod, which a pod-like string it never saw would not get).
 * The evidence and the answer keep pointing at the same component; only its name changes. The
 * expert's correct answers on the training faults name few services, so a small model trained on
 * the original names repeats them; renamed copies leave copying the name from the evidence as the
 * only way to be right (notes/tiny-model.md; what it measured: docs/experiments.md, issue 13).
 * Free text that spells a service otherwise (class names in log lines, endpoint paths) keeps its
 * spelling.
 */
import { z } from 'zod';
import { Rng } from '../rng';
import type { Topology } from '../types';
import type { TeacherEpisode } from './teacher';

export const RenameSettingsSchema = z
  .object({
    /**
     * Renamed copies per teacher conversation, each with its own permutation of the service names.
     * 0 keeps the original names only; n >= 1 replaces each conversation by n renamed copies. Default 0.
     */
    copies: z
      .number()
      .int()
      .min(0)
      .default(0)
      .describe(
        'Renamed copies per teacher conversation, each with its own permutation of the service names. 0 keeps the original names only; n >= 1 replaces each conversation by n renamed copies. Default 0.',
      ),
  })
  .strict();
export type RenameSettingsInput = z.input<typeof RenameSettingsSchema>;

const escapeRegex = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * A function that renames by `mapping` in a text: whole names only (not preceded by a
 * name character, not followed by a letter or digit, so a pod "<service>-<hash>" the mapping does
 * not name is renamed in its prefix), the longest name first where one name starts another.
 */
export function nameRenamer(mapping: ReadonlyMap<string, string>): (text: string) => string {
  const names = [...mapping.keys()].sort((a, b) => b.length - a.length);
  if (!names.length) return (text) => text;
  const re = new RegExp(`(?<![A-Za-z0-9_-])(?:${names.map(escapeRegex).join('|')})(?![A-Za-z0-9])`, 'g');
  return (text) => text.replace(re, (name) => mapping.get(name)!);
}

/**
 * A seeded random permutation of the topology's services, as old name -> new name, with each
 * service's k-th pod mapped to the new service's k-th pod (cyclically where it has fewer; a
 * service without pods leaves its pods to the prefix rule of nameRenamer).
 */
export function namePermutation(topology: Pick<Topology, 'services' | 'pods'>, seed: number): Map<string, string> {
  const to = [...topology.services];
  const rng = new Rng(seed);
  for (let i = to.length - 1; i > 0; i--) {
    const j = Math.floor(rng.next() * (i + 1));
    [to[i], to[j]] = [to[j], to[i]];
  }
  const mapping = new Map(topology.services.map((s, i) => [s, to[i]]));
  const podsOf = (service: string) => topology.pods.filter((p) => p.service === service).map((p) => p.pod);
  for (const [from, into] of [...mapping]) {
    const targets = podsOf(into);
    if (targets.length) podsOf(from).forEach((pod, k) => mapping.set(pod, targets[k % targets.length]));
  }
  return mapping;
}

/**
 * The episode with every text of its record renamed (messages, tool calls, answer, path): what
 * SFT trains on is the renamed conversation. The case stays the one played, under its own names.
 */
export function renamedEpisode(ep: TeacherEpisode, mapping: ReadonlyMap<string, string>): TeacherEpisode {
  const rename = nameRenamer(mapping);
  const record = JSON.parse(JSON.stringify(ep.record), (_key, value: unknown) =>
    typeof value === 'string' ? rename(value) : value,
  ) as TeacherEpisode['record'];
  return { ...ep, record };
}

/**
 * Each episode replaced by `copies` renamed copies (its own permutation each, seeded by `seed`
 * and the episode's index); copies 0 returns the episodes as they are.
 */
export function renamedEpisodes(
  episodes: readonly TeacherEpisode[],
  topology: Pick<Topology, 'services' | 'pods'>,
  settings: RenameSettingsInput,
  seed: number,
): TeacherEpisode[] {
  const { copies } = RenameSettingsSchema.parse(settings);
  if (copies === 0) return [...episodes];
  return episodes.flatMap((ep, i) =>
    Array.from({ length: copies }, (_, k) => renamedEpisode(ep, namePermutation(topology, seed + i * copies + k))),
  );
}
