/** zod issues of a run config as readable messages: what was expected and what the file has. */
import type { z } from 'zod';
import type { ConfigIssue } from './errors';
import type { YamlPath, YamlSource } from './yaml-source';
import { zodIssuePath } from '@thinkfl/env';

type Def = Record<string, unknown> & { type: string };

function valueAt(data: unknown, path: YamlPath): unknown {
  let v = data;
  for (const seg of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<string | number, unknown>)[seg];
  }
  return v;
}

export function describeValue(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  if (typeof v === 'string') return `string ${JSON.stringify(v)}`;
  return `${typeof v} ${String(v)}`;
}

const WRAPPERS = ['default', 'prefault', 'optional', 'nullable'];

function unwrap(def: Def): Def {
  while (WRAPPERS.includes(def.type) || def.type === 'pipe') {
    def = ((def.type === 'pipe' ? def.in : def.innerType) as z.ZodType)._zod.def as unknown as Def;
  }
  return def;
}

/** The union's option that fits `here`: by its discriminator when it has one, else the first object. */
function pickOption(def: Def, here: unknown): Def | undefined {
  const disc = def.discriminator as string | undefined;
  const objects = (def.options as z.ZodType[]).map((o) => unwrap(o._zod.def as unknown as Def)).filter((d) => d.type === 'object');
  if (!disc) return objects[0];
  const value = here && typeof here === 'object' ? (here as Record<string, unknown>)[disc] : undefined;
  return objects.find((d) => (d.shape as Record<string, z.ZodType>)[disc]?.safeParse(value).success);
}

/** The schema node at `path` inside `schema`, through defaults and pipes, unions matched on the data. */
function nodeAt(schema: z.ZodType, path: YamlPath, data: unknown): Def | undefined {
  let def = unwrap(schema._zod.def as unknown as Def);
  for (let i = 0; i < path.length; i++) {
    if (def.type === 'union') {
      const picked = pickOption(def, valueAt(data, path.slice(0, i)));
      if (!picked) return undefined;
      def = picked;
    }
    if (def.type !== 'object') return undefined;
    const next = (def.shape as Record<string, z.ZodType>)[String(path[i])];
    if (!next) return undefined;
    def = unwrap(next._zod.def as unknown as Def);
  }
  return def;
}

function objectKeys(schema: z.ZodType, path: YamlPath, data: unknown): string[] | undefined {
  let def = nodeAt(schema, path, data);
  if (def?.type === 'union') def = pickOption(def, valueAt(data, path));
  return def?.type === 'object' ? Object.keys(def.shape as object) : undefined;
}

/** The accepted values of a union's discriminator, e.g. the backend kinds. */
function discriminatorValues(schema: z.ZodType, unionPath: YamlPath, data: unknown): unknown[] | undefined {
  const def = nodeAt(schema, unionPath, data);
  const disc = def?.discriminator as string | undefined;
  if (def?.type !== 'union' || !disc) return undefined;
  return (def.options as z.ZodType[]).flatMap((o) => {
    const d = unwrap(o._zod.def as unknown as Def);
    const lit = (d.shape as Record<string, z.ZodType>)[disc]?._zod.def as unknown as Def;
    return (lit?.values as unknown[]) ?? [];
  });
}

/** `dMax` -> `d_max`: the snake_case spelling of a key written camelCase, for the "renamed" hint. */
function snakeCase(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

/** Edit distance, for "did you mean" on a misspelt key. */
function distance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++)
    for (let j = 1; j <= b.length; j++)
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
  return d[a.length][b.length];
}

/** Keys that moved elsewhere: D_max is given once, as episode.d_max. */
const MOVED: Record<string, string> = {
  'graders.route.d_max': 'episode.d_max',
  'stages.priming.sft.teacher.d_max': 'episode.d_max',
};

function unknownKey(path: YamlPath, key: string, known: string[] | undefined): string {
  const snake = snakeCase(key);
  const moved = MOVED[[...path, snake].join('.')];
  if (moved) return `D_max is given once, as ${moved}; remove this key`;
  if (!known) return 'unknown key';
  // Run config keys are snake_case; an old camelCase spelling gets its new one.
  if (snake !== key && known.includes(snake)) return `renamed: write ${snake} (run config keys are snake_case)`;
  const limit = key.length >= 4 ? Math.max(2, Math.floor(key.length / 3)) : 1;
  const close = known.filter((k) => distance(k.toLowerCase(), key.toLowerCase()) <= limit);
  const hint = close.length ? ` (did you mean ${close.join(' or ')}?)` : '';
  return `unknown key${hint}; expected one of: ${known.join(', ')}`;
}

function message(issue: z.core.$ZodIssue, value: unknown, present: boolean): string {
  switch (issue.code) {
    case 'invalid_type':
      return present ? `expected ${issue.expected}, got ${describeValue(value)}` : `required: expected ${issue.expected}`;
    case 'invalid_value':
      return `expected one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}, got ${describeValue(value)}`;
    case 'invalid_union': {
      const firsts = issue.errors.map((branch) => branch[0]?.message).filter(Boolean);
      return `matches none of the accepted forms (${firsts.join('; or ')}), got ${describeValue(value)}`;
    }
    case 'custom':
      return issue.message;
    default:
      return present ? `${issue.message}, got ${describeValue(value)}` : issue.message;
  }
}

/** One ConfigIssue per problem, unknown keys one each, located in the YAML source. */
export function toConfigIssues(error: z.ZodError, schema: z.ZodType, src: YamlSource): ConfigIssue[] {
  const out: ConfigIssue[] = [];
  // A required key written in its old camelCase spelling is reported as renamed, not also as missing.
  const respelt = new Set(
    error.issues.flatMap((i) => (i.code === 'unrecognized_keys' ? i.keys.map((k) => [...i.path, snakeCase(k)].join('.')) : [])),
  );
  for (const issue of error.issues) {
    const path = issue.path as (string | number)[];
    if (respelt.has(path.join('.')) && valueAt(src.data, path) === undefined) continue;
    if (issue.code === 'unrecognized_keys') {
      const known = objectKeys(schema, path, src.data);
      for (const key of issue.keys) {
        out.push({ path: [...path, key].join('.'), line: src.lineOf([...path, key], true), message: unknownKey(path, key, known) });
      }
      continue;
    }
    const value = valueAt(src.data, path);
    const accepted = issue.code === 'invalid_union' ? discriminatorValues(schema, path.slice(0, -1), src.data) : undefined;
    if (accepted) {
      const msg = `expected one of ${accepted.map((v) => JSON.stringify(v)).join(', ')}, got ${describeValue(value)}`;
      out.push({ path: zodIssuePath(issue), line: src.lineOf(path), message: msg });
      continue;
    }
    out.push({ path: zodIssuePath(issue), line: src.lineOf(path), message: message(issue, value, value !== undefined) });
  }
  return out.sort((a, b) => (a.line ?? 0) - (b.line ?? 0));
}
