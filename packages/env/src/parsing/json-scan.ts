/** Finds JSON objects inside free text (model output), string- and escape-aware. */

export type JsonFound = { ok: true; value: unknown; start: number; end: number } | { ok: false; error: string };

/** End (exclusive) of the balanced {...} starting at `start`, or -1 when it never closes. */
function balancedEnd(text: string, start: number): number {
  let depth = 0;
  let inString = false;
  let escaped = false;
  for (let i = start; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (escaped) escaped = false;
      else if (c === '\\') escaped = true;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') depth++;
    else if (c === '}') {
      depth--;
      if (depth === 0) return i + 1;
    }
  }
  return -1;
}

/** The first JSON object at or after `from`. */
export function firstJsonObject(text: string, from = 0): JsonFound {
  const start = text.indexOf('{', from);
  if (start < 0) return { ok: false, error: 'no JSON object found' };
  const end = balancedEnd(text, start);
  if (end < 0) return { ok: false, error: 'JSON object is not closed (truncated output?)' };
  try {
    return { ok: true, value: JSON.parse(text.slice(start, end)), start, end };
  } catch (e) {
    return { ok: false, error: `invalid JSON: ${(e as Error).message.slice(0, 120)}` };
  }
}

/**
 * Every top-level JSON object in the text, skipping unparsable brace runs. Bounded by
 * `maxAttempts` so that adversarial brace soup stays linear-ish.
 */
export function allJsonObjects(text: string, maxAttempts = 32): { values: unknown[]; lastError?: string } {
  const values: unknown[] = [];
  let lastError: string | undefined;
  let from = 0;
  for (let attempt = 0; attempt < maxAttempts; attempt++) {
    const found = firstJsonObject(text, from);
    if (found.ok) {
      values.push(found.value);
      from = found.end;
      continue;
    }
    lastError = found.error;
    if (found.error !== 'no JSON object found' && !found.error.startsWith('JSON object is not closed')) {
      from = text.indexOf('{', from) + 1;
      continue;
    }
    break;
  }
  return { values, lastError };
}

/** Removes a surrounding Markdown code fence (```json ... ```), if any. */
export function stripFence(text: string): string {
  const m = /^\s*```[a-zA-Z0-9_-]*\s*\n?([\s\S]*?)\n?\s*```\s*$/.exec(text);
  return m ? m[1] : text;
}

/** Drops closed <think>...</think> blocks: calls written while reasoning do not count. */
export function stripThinking(text: string): string {
  return text.replace(/<think>[\s\S]*?<\/think>/g, '');
}
