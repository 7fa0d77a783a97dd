/**
 * Hermes `<tool_call>{json}</tool_call>`, and the unclosed `<tool_call>{json}<tool_call>` form
 * that the published ThinkFL models emit: a call runs from an opening tag to the next tag of
 * either kind, or to the end.
 */
import { collect, toCall, type CallResult } from './call';
import { firstJsonObject, stripFence } from './json-scan';
import { registerFormat } from './registry';

const OPEN = '<tool_call>';
const TAG = /<\/?tool_call>/g;

function segments(text: string): string[] {
  const out: string[] = [];
  const tags = [...text.matchAll(TAG)];
  tags.forEach((m, i) => {
    if (m[0] !== OPEN) return;
    const from = (m.index ?? 0) + m[0].length;
    const to = i + 1 < tags.length ? (tags[i + 1].index ?? text.length) : text.length;
    const body = text.slice(from, to).trim();
    if (body) out.push(body);
  });
  return out;
}

function one(body: string): CallResult {
  const found = firstJsonObject(stripFence(body));
  if (!found.ok) return { ok: false, error: `<tool_call> does not hold a JSON object: ${found.error}` };
  return toCall(found.value, 'hermes', body);
}

registerFormat({
  name: 'hermes',
  priority: 1,
  detect: (_msg, text) => text.includes(OPEN),
  parse(_msg, text) {
    const bodies = segments(text);
    if (bodies.length === 0) return { ok: false, error: '<tool_call> is empty' };
    return collect(bodies.map(one));
  },
});
