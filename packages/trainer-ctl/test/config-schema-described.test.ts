/**
 * Every property of the run config's JSON Schema (configs/run.schema.json; config-presets.test.ts
 * checks the committed file is the generated one) carries a description: editors show it on
 * hover, and configs/README.md sends readers there for each knob's meaning, unit and default.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { runConfigJsonSchema } from '../src/config';

type Json = { [k: string]: unknown };
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

// if/then/else/not are not walked: they only restate conditions on properties declared under
// `properties` (e.g. grpo.loss: Dr.GRPO's norm_length, whose own entry is described).
const BRANCHES = ['anyOf', 'oneOf', 'allOf'] as const;

/** Paths of properties without a description: `a.b`, `a[]` for array items, `a<kind=x>` for the branch of a union. */
function undescribed(root: Json): string[] {
  const defs = isObject(root.$defs) ? root.$defs : {};
  const described = (p: unknown, seen = new Set<string>()): boolean => {
    if (!isObject(p)) return false;
    if (typeof p.description === 'string' && p.description.trim() !== '') return true;
    const ref = typeof p.$ref === 'string' ? p.$ref.replace('#/$defs/', '') : undefined;
    return ref !== undefined && !seen.has(ref) && described(defs[ref], seen.add(ref));
  };
  const branchName = (b: unknown, i: number): string => {
    const props = isObject(b) && isObject(b.properties) ? b.properties : {};
    const tag = Object.entries(props).find(([, v]) => isObject(v) && v.const !== undefined);
    return tag ? `<${tag[0]}=${String((tag[1] as Json).const)}>` : `<${i}>`;
  };
  const missing: string[] = [];
  const walk = (node: unknown, path: string): void => {
    if (!isObject(node)) return;
    if (isObject(node.properties)) {
      for (const [key, prop] of Object.entries(node.properties)) {
        const at = path ? `${path}.${key}` : key;
        if (!described(prop)) missing.push(at);
        walk(prop, at);
      }
    }
    if (node.items !== undefined) for (const item of [node.items].flat()) walk(item, `${path}[]`);
    if (Array.isArray(node.prefixItems)) node.prefixItems.forEach((item, i) => walk(item, `${path}[${i}]`));
    if (isObject(node.additionalProperties)) walk(node.additionalProperties, `${path}.*`);
    for (const k of BRANCHES) if (Array.isArray(node[k])) node[k].forEach((b, i) => walk(b, `${path}${branchName(b, i)}`));
    if (isObject(node.$defs)) for (const [name, d] of Object.entries(node.$defs)) walk(d, `$defs.${name}`);
  };
  walk(root, '');
  return [...new Set(missing)];
}

describe('run.schema.json', () => {
  it('describes every property, at every depth', () => {
    expect(undescribed(runConfigJsonSchema()), 'properties without .describe() in their zod schema').toEqual([]);
  });

  it('names each undescribed property, in objects, array items, union branches and $defs', () => {
    const Node: z.ZodType<{ label: string; next?: unknown }> = z.lazy(() =>
      z.object({ label: z.string(), next: Node.optional().describe('the next node') }),
    );
    const planted = z.toJSONSchema(
      z.object({
        kept: z.number().describe('described'),
        loss: z.object({ eps_low: z.number(), eps_high: z.number().describe('described') }).describe('described'),
        terms: z.array(z.object({ weight: z.number() })).describe('described'),
        backend: z
          .discriminatedUnion('kind', [
            z.object({ kind: z.literal('onnx').describe('described'), threads: z.number() }),
            z.object({ kind: z.literal('vllm').describe('described'), replicas: z.array(z.string()).describe('described') }),
          ])
          .describe('described'),
        tree: Node.describe('described'),
      }),
    ) as Json;
    const found = undescribed(planted);
    expect(found).toHaveLength(4);
    expect(found).toEqual(
      expect.arrayContaining(['loss.eps_low', 'terms[].weight', 'backend<kind=onnx>.threads', expect.stringMatching(/\.label$/)]),
    );
  });
});
