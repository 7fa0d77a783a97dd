/**
 * The keys a zod schema knows at a path of the data, and what to say about a key it does not
 * know: the one hint of every "unknown key" message (renamed to snake_case, did you mean, the
 * keys it takes), for run configs, settings files and settings given in code alike.
 */
import type { z } from 'zod';

type Def = Record<string, unknown> & { type: string };
type Path = readonly PropertyKey[];

/** The value at `path` inside `data`; undefined where the path leaves the data. */
export function valueAt(data: unknown, path: Path): unknown {
  let v = data;
  for (const seg of path) {
    if (v === null || typeof v !== 'object') return undefined;
    v = (v as Record<PropertyKey, unknown>)[seg];
  }
  return v;
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
function nodeAt(schema: z.ZodType, path: Path, data: unknown): Def | undefined {
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

/** Keys of the object schema at `path` (the union option the data picks); undefined when that is no object. */
export function knownKeys(schema: z.ZodType, path: Path, data: unknown): string[] | undefined {
  let def = nodeAt(schema, path, data);
  if (def?.type === 'union') def = pickOption(def, valueAt(data, path));
  return def?.type === 'object' ? Object.keys(def.shape as object) : undefined;
}

/** The accepted values of the discriminator of the union at `unionPath`, e.g. the backend kinds. */
export function discriminatorValues(schema: z.ZodType, unionPath: Path, data: unknown): unknown[] | undefined {
  const def = nodeAt(schema, unionPath, data);
  const disc = def?.discriminator as string | undefined;
  if (def?.type !== 'union' || !disc) return undefined;
  return (def.options as z.ZodType[]).flatMap((o) => {
    const d = unwrap(o._zod.def as unknown as Def);
    const lit = (d.shape as Record<string, z.ZodType>)[disc]?._zod.def as unknown as Def;
    return (lit?.values as unknown[]) ?? [];
  });
}

/** `dMax` -> `d_max`: the snake_case spelling of a key written camelCase. */
export function snakeCase(key: string): string {
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

/** What is wrong with `key` where the schema takes the `known` keys (undefined: not known). */
export function unknownKeyHint(key: string, known: string[] | undefined): string {
  if (!known) return 'unknown key';
  const snake = snakeCase(key);
  // Keys that cross a boundary are snake_case (issue 28); an old camelCase spelling gets its new one.
  if (snake !== key && known.includes(snake)) return `renamed: write ${snake} (keys are snake_case)`;
  const limit = key.length >= 4 ? Math.max(2, Math.floor(key.length / 3)) : 1;
  const close = known.filter((k) => distance(k.toLowerCase(), key.toLowerCase()) <= limit);
  const hint = close.length ? ` (did you mean ${close.join(' or ')}?)` : '';
  return `unknown key${hint}; expected one of: ${known.join(', ')}`;
}
