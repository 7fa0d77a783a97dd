/** JSON Schema of the run config for editors (configs/run.schema.json), generated from the zod schema. */
import { z } from 'zod';
import { RunConfigSchema } from './schema';

export function runConfigJsonSchema(): Record<string, unknown> {
  const schema = z.toJSONSchema(RunConfigSchema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
  return { ...schema, title: 'ThinkFL trainer-ctl run config' };
}
