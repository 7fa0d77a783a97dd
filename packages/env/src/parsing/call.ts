/** Turns a decoded {name, arguments|parameters} object into a ParsedToolCall. */
import type { ParsedToolCall } from '../types';

export type CallResult = { ok: true; call: ParsedToolCall } | { ok: false; error: string };

export type ParseResult = { ok: true; calls: ParsedToolCall[] } | { ok: false; error: string };

/** A model may send arguments as a JSON string; decode it when it holds an object. */
export function decodeArguments(args: unknown): unknown {
  if (args === undefined || args === null) return {};
  if (typeof args !== 'string') return args;
  const s = args.trim();
  if (s === '') return {};
  try {
    return JSON.parse(s);
  } catch {
    return args;
  }
}

export function toCall(value: unknown, format: ParsedToolCall['format'], raw: string): CallResult {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { ok: false, error: 'a tool call must be a JSON object {"name": ..., "arguments": {...}}' };
  }
  const o = value as Record<string, unknown>;
  const name = o.name;
  if (typeof name !== 'string' || name.trim() === '') {
    return { ok: false, error: 'the tool call has no "name" string' };
  }
  if (name.length > 100) return { ok: false, error: 'the tool name is too long' };
  const args = 'arguments' in o ? o.arguments : o.parameters;
  return { ok: true, call: { name: name.trim(), arguments: decodeArguments(args), format, raw } };
}

/** Collects calls, failing on the first bad one. */
export function collect(results: CallResult[]): ParseResult {
  const calls: ParsedToolCall[] = [];
  for (const r of results) {
    if (!r.ok) return r;
    calls.push(r.call);
  }
  return { ok: true, calls };
}
