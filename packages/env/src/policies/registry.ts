/**
 * Registry of policies that need no model: rankers (classic baselines that rank components
 * straight from a case's trace and the dataset) and agents (scripted policies that play an
 * episode protocol). Each policy is one file that calls `registerPolicy`; builtin.ts imports them.
 */
import type { z } from 'zod';
import type { Case, Dataset, Policy, RootCause } from '../types';
import { formatZodIssues } from '../zod-issues';

/** A baseline: ranked root causes for a case, most suspicious first. */
export interface Ranker {
  rank(c: Case): RootCause[];
}

interface Common<S> {
  name: string;
  description: string;
  /** Settings of the policy; every knob documented in its schema. */
  settings: z.ZodType<S>;
}

export interface RankerDefinition<S = unknown> extends Common<S> {
  kind: 'ranker';
  create(dataset: Dataset, settings: S): Ranker;
}

export interface AgentDefinition<S = unknown> extends Common<S> {
  kind: 'agent';
  /** The protocol the agent plays unless told otherwise (a seed system's stand-in plays its own). Default 'rot'. */
  protocol?: string;
  create(dataset: Dataset, settings: S): Policy;
}

export type PolicyDefinition<S = unknown> = RankerDefinition<S> | AgentDefinition<S>;

const policies = new Map<string, PolicyDefinition<never>>();

export function registerPolicy<S>(def: PolicyDefinition<S>): void {
  if (policies.has(def.name)) throw new Error(`policy ${def.name} registered twice`);
  policies.set(def.name, def as unknown as PolicyDefinition<never>);
}

export function policyNames(): string[] {
  return [...policies.keys()];
}

export function getPolicy(name: string): PolicyDefinition<unknown> {
  const def = policies.get(name);
  if (!def) throw new Error(`unknown policy "${name}"; known: ${policyNames().join(', ')}`);
  return def as unknown as PolicyDefinition<unknown>;
}

/** Parses a policy's settings; errors name the offending key under `path` (an old camelCase key with its new spelling). */
export function parsePolicySettings<S>(def: PolicyDefinition<S>, input: unknown, path = `policies.${def.name}`): S {
  const data = input ?? {};
  const r = def.settings.safeParse(data);
  if (r.success) return r.data;
  throw new Error(`invalid settings of policy ${def.name}: ${formatZodIssues(r.error, path, { schema: def.settings, data })}`);
}
