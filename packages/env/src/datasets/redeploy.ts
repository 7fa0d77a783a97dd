/**
 * A simulated redeploy of the system a dataset was recorded on: every pod gets the new name
 * Kubernetes gives a re-created pod (the same ReplicaSet hash, a new 5-character suffix, as
 * ts-contacts-service-866bd68c97-xcqfx on 2023-01-29 became ...-866bd68c97-dzqgd on another
 * day), consistently in every part of the dataset (topology, spans, metrics, logs, truths).
 * Names that run-specific make no vocabulary: a policy is expected to play a redeployed dataset
 * as it plays the original (episode.tool_settings.pod_aliases shows both the same way).
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { loadDataset, type LoadedDataset } from './load';
import type { TopologyData } from './stores/topology';

/** Kubernetes' alphabet of generated name suffixes (k8s.io/apimachinery rand.String: no vowels, no 0, 1, 3). */
const SUFFIX_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';
const SUFFIX_LENGTH = 5;

function suffixOf(seed: number, pod: string, attempt: number): string {
  const digest = createHash('sha256').update(`${seed}\0${pod}\0${attempt}`).digest();
  return Array.from(digest.subarray(0, SUFFIX_LENGTH), (b) => SUFFIX_ALPHABET[b % SUFFIX_ALPHABET.length]).join('');
}

/**
 * Old pod name -> new pod name, deterministic in the seed. The last dash-separated part of a
 * pod name (Kubernetes' random suffix) is replaced; a pod with no dash gets a suffix appended.
 * New names never coincide with one another or with any name in `taken` (the old pods, services, nodes).
 */
export function redeployPodNames(pods: readonly string[], seed: number, taken: Iterable<string> = []): Map<string, string> {
  const used = new Set<string>([...pods, ...taken]);
  const out = new Map<string, string>();
  for (const pod of [...new Set(pods)].sort()) {
    const dash = pod.lastIndexOf('-');
    const stem = dash > 0 ? pod.slice(0, dash) : pod;
    let name: string;
    let attempt = 0;
    do name = `${stem}-${suffixOf(seed, pod, attempt++)}`;
    while (used.has(name));
    used.add(name);
    out.set(pod, name);
  }
  return out;
}

/** A function that replaces every whole pod name of `mapping` in a text (longest first; a name is not part of a longer word). */
export function podRenamer(mapping: ReadonlyMap<string, string>): (text: string) => string {
  const names = [...mapping.keys()].sort((a, b) => b.length - a.length);
  if (!names.length) return (text) => text;
  const escaped = names.map((n) => n.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  const re = new RegExp(`(?<![A-Za-z0-9_.-])(?:${escaped.join('|')})(?![A-Za-z0-9_-])`, 'g');
  return (text) => text.replace(re, (name) => mapping.get(name)!);
}

export interface RedeployedDataset extends LoadedDataset {
  /** Old pod name -> the name it has in this dataset. */
  podNames: Map<string, string>;
}

/**
 * The dataset in `dir` as a redeploy with seed `seed` would have recorded it: each part's JSON
 * text has every pod name replaced before it is parsed, so no store or field can keep an old one.
 */
export async function loadRedeployedDataset(dir: string, seed: number): Promise<RedeployedDataset> {
  const t = JSON.parse(await readFile(join(dir, 'topology.json'), 'utf8')) as TopologyData;
  const podNames = redeployPodNames(
    t.pods.map((p) => p.pod),
    seed,
    [...t.services, ...t.nodes],
  );
  const rename = podRenamer(podNames);
  return { ...(await loadDataset(dir, rename)), podNames };
}
