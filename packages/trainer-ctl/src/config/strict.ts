/**
 * Makes every object of a schema reject unknown keys, at any depth. The run config embeds
 * settings schemas owned by other packages (tools, episodes, graders, loss); some of those
 * strip unknown keys, and a misspelt knob that silently falls back to its default is exactly
 * the mistake a run config must catch.
 */
import { z } from 'zod';

type Def = Record<string, unknown> & { type: string };

function withDef(schema: z.ZodType, def: Def): z.ZodType {
  const copy = (schema as unknown as { clone(def: Def): z.ZodType }).clone(def);
  // Descriptions live in zod's registry, keyed by schema instance: carry them to the copy.
  const meta = z.globalRegistry.get(schema);
  if (meta) z.globalRegistry.add(copy, meta);
  return copy;
}

export function deepStrict<T extends z.ZodType>(schema: T): T {
  const def = schema._zod.def as unknown as Def;
  switch (def.type) {
    case 'object': {
      const shape = Object.fromEntries(Object.entries(def.shape as Record<string, z.ZodType>).map(([k, v]) => [k, deepStrict(v)]));
      const catchall = def.catchall as z.ZodType | undefined;
      // A deliberate catchall (a map of arbitrary keys) stays; a missing one becomes "none allowed".
      return withDef(schema, { ...def, shape, catchall: catchall ?? z.never() }) as T;
    }
    case 'default':
    case 'prefault':
    case 'optional':
    case 'nullable':
      return withDef(schema, { ...def, innerType: deepStrict(def.innerType as z.ZodType) }) as T;
    case 'array':
      return withDef(schema, { ...def, element: deepStrict(def.element as z.ZodType) }) as T;
    default:
      return schema;
  }
}
