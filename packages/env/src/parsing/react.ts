/** ReAct `Action: <tool>` / `Action Input: {json}` lines. */
import { collect, toCall, type CallResult } from './call';
import { firstJsonObject, stripFence } from './json-scan';
import { registerFormat } from './registry';

const ACTION = /^[ \t]*Action[ \t]*:[ \t]*(.*)$/gim;
const INPUT = /^[ \t]*Action[ \t]+Input[ \t]*:/im;
const STOP = /^[ \t]*(Observation|Thought|Final Answer)[ \t]*:/im;

function one(block: string): CallResult {
  const first = block.indexOf('\n');
  const name = (first < 0 ? block : block.slice(0, first)).trim().replace(/^[`"'*]+|[`"'*]+$/g, '');
  const rest = first < 0 ? '' : block.slice(first + 1);
  const input = INPUT.exec(rest);
  if (!input) return { ok: false, error: `Action "${name.slice(0, 40)}" has no "Action Input:" line` };
  let body = rest.slice(input.index + input[0].length);
  const stop = STOP.exec(body);
  if (stop) body = body.slice(0, stop.index);
  body = stripFence(body.trim());
  if (body === '') return toCall({ name, arguments: {} }, 'react', block);
  const found = firstJsonObject(body);
  if (!found.ok) return { ok: false, error: `Action Input must be a JSON object: ${found.error}` };
  return toCall({ name, arguments: found.value }, 'react', block);
}

registerFormat({
  name: 'react',
  priority: 2,
  detect: (_msg, text) => new RegExp(ACTION.source, 'im').test(text),
  parse(_msg, text) {
    const starts = [...text.matchAll(ACTION)].map((m) => m.index ?? 0);
    const blocks = starts.map((s, i) => {
      const block = text.slice(s, i + 1 < starts.length ? starts[i + 1] : text.length);
      return block.replace(/^[ \t]*Action[ \t]*:[ \t]*/i, '');
    });
    return collect(blocks.map(one));
  },
});
