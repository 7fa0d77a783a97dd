/**
 * The identity of a reasoning path for the diversity grader (ThinkFL Algorithm 2): the
 * (tool, arguments) sequence with repeated identical calls dropped, canonicalised and hashed.
 */
import { createHash } from 'node:crypto';
import type { PathStep } from '@thinkfl/env';

function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object') {
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]),
    );
  }
  return v;
}

/** Sorted-key JSON of the arguments; text that is not JSON is kept as it is. */
function canonicalArgs(args: string): string {
  try {
    return JSON.stringify(sortKeys(JSON.parse(args)));
  } catch {
    return args;
  }
}

/** The path's calls in order, each (tool, arguments) pair kept at its first occurrence only. */
export function dedupedCalls(path: PathStep[]): [string, string][] {
  const seen = new Set<string>();
  const calls: [string, string][] = [];
  for (const step of path) {
    const call: [string, string] = [step.tool, canonicalArgs(step.args)];
    const id = JSON.stringify(call);
    if (seen.has(id)) continue;
    seen.add(id);
    calls.push(call);
  }
  return calls;
}

/** SHA-256 (hex) of the de-duplicated call sequence. */
export function pathKey(path: PathStep[]): string {
  return createHash('sha256')
    .update(JSON.stringify(dedupedCalls(path)))
    .digest('hex');
}
