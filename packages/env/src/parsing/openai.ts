/** OpenAI `tool_calls` attached to the message; arguments are a JSON string. */
import { collect, toCall, type CallResult } from './call';
import { registerFormat } from './registry';

function one(tc: unknown, i: number): CallResult {
  const fn = typeof tc === 'object' && tc !== null ? (tc as { function?: unknown }).function : undefined;
  if (typeof fn !== 'object' || fn === null) return { ok: false, error: `tool_calls[${i}] has no function` };
  const { name, arguments: args } = fn as { name?: unknown; arguments?: unknown };
  if (typeof args === 'string' && args.trim() !== '') {
    try {
      JSON.parse(args);
    } catch (e) {
      return { ok: false, error: `tool_calls[${i}].function.arguments is not valid JSON: ${(e as Error).message.slice(0, 120)}` };
    }
  }
  let raw: string;
  try {
    raw = JSON.stringify(tc) ?? '';
  } catch {
    raw = '';
  }
  return toCall({ name, arguments: args }, 'openai', raw);
}

registerFormat({
  name: 'openai',
  priority: 0,
  detect: (msg) => Array.isArray(msg.tool_calls) && msg.tool_calls.length > 0,
  parse: (msg) => collect((msg.tool_calls ?? []).map(one)),
});
