/**
 * One style for the run config: every key is snake_case, as in TRL, verl and OpenRLHF
 * configs. The settings schemas the config embeds from other packages (episode, tools,
 * graders, backends, the expert) name their keys in camelCase, as TypeScript does; this turns
 * such a schema into one that reads snake_case keys and gives the package's camelCase object,
 * so the packages keep their types and the YAML has one spelling.
 */
import { z } from 'zod';

type Def = Record<string, unknown> & { type: string; checks?: unknown[] };

/** `dMax` -> `d_max`, `topP` -> `top_p`; a snake_case key is returned as it is. */
export function snakeCase(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}

function withDef(schema: z.ZodType, def: Def): z.ZodType {
  const copy = (schema as unknown as { clone(def: Def): z.ZodType }).clone(def);
  carryMeta(schema, copy);
  return copy;
}

/** Descriptions live in zod's registry, keyed by schema instance: carry them to a derived schema. */
function carryMeta(from: z.ZodType, to: z.ZodType): void {
  const meta = z.globalRegistry.get(from);
  if (meta) z.globalRegistry.add(to, meta);
}

function renamed(value: unknown, back: Map<string, string>): unknown {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [back.get(k) ?? k, v]));
}

function convert(schema: z.ZodType): z.ZodType {
  const def = schema._zod.def as unknown as Def;
  switch (def.type) {
    case 'object': {
      const entries = Object.entries(def.shape as Record<string, z.ZodType>).map(([k, v]) => ({ key: k, snake: snakeCase(k), schema: convert(v) }));
      const shape = Object.fromEntries(entries.map((e) => [e.snake, e.schema]));
      if (entries.every((e) => e.key === e.snake)) return withDef(schema, { ...def, shape });
      // Checks (refinements) are written against the camelCase object: they run after the renaming.
      const back = new Map(entries.map((e) => [e.snake, e.key]));
      const read = withDef(schema, { ...def, shape, checks: [] });
      const checks = (def.checks ?? []) as z.core.$ZodCheck<unknown>[];
      const camel = read.transform((v) => renamed(v, back));
      const out = checks.length ? camel.pipe(z.unknown().check(...checks)) : camel;
      carryMeta(schema, out);
      return out;
    }
    case 'default':
    case 'prefault':
    case 'optional':
    case 'nullable':
      return withDef(schema, { ...def, innerType: convert(def.innerType as z.ZodType) });
    case 'array':
      return withDef(schema, { ...def, element: convert(def.element as z.ZodType) });
    case 'union':
      return withDef(schema, { ...def, options: (def.options as z.ZodType[]).map(convert) });
    default:
      return schema;
  }
}

/**
 * The schema with every object key, at any depth, read in snake_case; it parses to the same
 * (camelCase) output, so its output type is the original's.
 */
export function snakeKeys<T extends z.ZodType>(schema: T): T {
  return convert(schema) as T;
}

/** A parsed config's keys back in snake_case, as a YAML file writes them. */
export function toSnakeKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(toSnakeKeys);
  if (value === null || typeof value !== 'object') return value;
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [snakeCase(k), toSnakeKeys(v)]));
}
