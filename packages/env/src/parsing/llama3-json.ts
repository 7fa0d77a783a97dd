/**
 * Llama-3 JSON tool calls: `{"name": ..., "parameters": {...}}` as the message (optionally after
 * `<|python_tag|>`, in a code fence, or several separated by `;`).
 */
import { toCall, type CallResult } from './call';
import { allJsonObjects } from './json-scan';
import { registerFormat } from './registry';

const PYTHON_TAG = '<|python_tag|>';

function isCallShape(v: unknown): boolean {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && 'name' in v && ('parameters' in v || 'arguments' in v);
}

registerFormat({
  name: 'llama3_json',
  priority: 3,
  detect: (_msg, text) => text.includes(PYTHON_TAG) || /\{\s*"name"\s*:/.test(text),
  parse(_msg, text) {
    const body = text.includes(PYTHON_TAG) ? text.slice(text.indexOf(PYTHON_TAG) + PYTHON_TAG.length) : text;
    const { values, lastError } = allJsonObjects(body);
    const shaped = values.filter(isCallShape);
    if (shaped.length === 0) {
      return {
        ok: false,
        error: `expected a JSON call {"name": ..., "parameters": {...}}${lastError ? `: ${lastError}` : ''}`,
      };
    }
    const results: CallResult[] = shaped.map((v) => toCall(v, 'llama3_json', JSON.stringify(v)));
    const calls = results.flatMap((r) => (r.ok ? [r.call] : []));
    const bad = results.find((r) => !r.ok);
    return bad && !bad.ok ? bad : { ok: true, calls };
  },
});
