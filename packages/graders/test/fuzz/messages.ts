/**
 * Deterministic generator of random and malformed assistant messages for the episode fuzz
 * test: every call format, valid and broken, plus noise. Span ids and names come from the
 * real case being played, so valid calls reach the tools.
 */
import type { AssistantMessage } from '@thinkfl/env';
import { prng } from '../../../../testkit/prng';

/** What the generator may name: real spans, components and times of the case. */
export interface FuzzWorld {
  spanIds: string[];
  services: string[];
  pods: string[];
  nodes: string[];
  timestampUs: number;
}

const TOOLS = ['search_traces', 'search_fluctuating_metrics', 'search_logs', 'print_results'];
const NEAR_MISS = ['search_trace', 'Search_Traces', 'print_result', 'printResults', '', ' ', 'search_traces\n', 'tool', 'null'];
const UNICODE = ['漢字サービス', '🚆🔥', 'مرحبا', '\u200b\u200d', '\uD800', 'e\u0301', '\u0000', '\\u0041', '<|im_end|>', '<|eot_id|>'];

export class MessageFuzzer {
  private readonly r: () => number;
  constructor(seed: number) {
    this.r = prng(seed);
  }

  private int(n: number): number {
    return Math.floor(this.r() * n);
  }
  private pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)];
  }
  private chance(p: number): boolean {
    return this.r() < p;
  }

  private junk(len: number): string {
    const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789 {}[]":,<>/\\\n\t_-';
    let s = '';
    for (let i = 0; i < len; i++) s += this.chance(0.02) ? this.pick(UNICODE) : alphabet[this.int(alphabet.length)];
    return s;
  }

  private timestamp(w: FuzzWorld): unknown {
    const sec = w.timestampUs / 1e6;
    return this.pick<unknown>([
      Math.floor(sec),
      Math.floor(sec * 1000),
      w.timestampUs,
      w.timestampUs * 1000,
      new Date(sec * 1000).toISOString(),
      String(Math.floor(sec)),
      '2023-01-29 08:45:00',
      'yesterday',
      -1,
      0,
      1e300,
      null,
      { t: sec },
      [sec],
      '2023-02-30T25:61:00Z',
      NaN,
    ]);
  }

  private component(w: FuzzWorld): unknown {
    return this.pick<unknown>([
      this.pick(w.services),
      this.pick(w.pods),
      this.pick(w.nodes),
      'ts-made-up-service',
      this.pick(UNICODE),
      42,
      null,
      '',
      'ts-',
    ]);
  }

  private spanRef(w: FuzzWorld): unknown {
    return this.pick<unknown>([
      this.pick(w.spanIds),
      this.pick(w.spanIds),
      `s${this.int(12)}`,
      'deadbeefdeadbeef',
      this.pick(w.spanIds).toUpperCase(),
      12345,
      null,
      '',
      ['a'],
      { id: 'x' },
      this.junk(30),
    ]);
  }

  /** Arguments for a tool, valid or not. */
  private args(name: string, w: FuzzWorld): unknown {
    if (this.chance(0.08)) return this.pick<unknown>([null, [], 'x', 7, {}, { wrong_key: 1 }]);
    switch (name) {
      case 'search_traces':
        return { parent_span_id: this.spanRef(w) };
      case 'search_fluctuating_metrics':
      case 'search_logs':
        return { service_name: this.component(w), timestamp: this.timestamp(w) };
      case 'print_results': {
        const one = () =>
          this.pick<unknown>([
            { pod: this.pick(w.pods) },
            { service: this.pick(w.services), reason: this.junk(20) },
            { node: this.pick(w.nodes) },
            { reason: 'only' },
            'ts-order-service',
            {},
          ]);
        return { root_causes: this.chance(0.1) ? this.pick<unknown>([[], 'all', null]) : Array.from({ length: 1 + this.int(4) }, one) };
      }
      default:
        return { x: this.junk(10) };
    }
  }

  private callObject(w: FuzzWorld): { name: unknown; arguments: unknown } {
    const name = this.chance(0.85) ? this.pick(TOOLS) : this.pick<unknown>([...NEAR_MISS, 5, null]);
    return { name, arguments: this.args(typeof name === 'string' ? name : '', w) };
  }

  private json(o: unknown): string {
    try {
      return JSON.stringify(o) ?? 'null';
    } catch {
      return 'null';
    }
  }

  private reasoning(): string {
    return this.pick(['', 'Let me look at the slowest child.\n', '<think>the gateway is slow</think>\n', 'Thought: check deeper.\n']);
  }

  /** One assistant message. */
  next(w: FuzzWorld): AssistantMessage {
    const kind = this.int(16);
    const call = this.callObject(w);
    const body = this.json(call);
    const pre = this.reasoning();
    switch (kind) {
      case 0:
      case 1:
        return { content: `${pre}<tool_call>\n${body}\n</tool_call>` };
      case 2:
        return { content: `${pre}<tool_call>${body}<tool_call>` };
      case 3:
        return {
          content: pre,
          tool_calls: [
            {
              id: `call_${this.int(1e6)}`,
              type: 'function',
              function: { name: call.name as string, arguments: this.chance(0.9) ? this.json(call.arguments) : (call.arguments as string) },
            },
          ],
        };
      case 4:
        return { content: `${pre}Action: ${String(call.name)}\nAction Input: ${this.json(call.arguments)}\nObservation:` };
      case 5:
        return { content: `${this.chance(0.5) ? '<|python_tag|>' : ''}${this.json({ name: call.name, parameters: call.arguments })}` };
      case 6: // truncated JSON
        return { content: `<tool_call>${body.slice(0, this.int(body.length))}` };
      case 7: // nested and stray tags
        return {
          content: this.pick([
            `<tool_call><tool_call>${body}</tool_call></tool_call>`,
            `</tool_call>${body}<tool_call>`,
            `<tool_call>{"name": "<tool_call>", "arguments": {"x": "</tool_call>"}}</tool_call>`,
            '<tool_call></tool_call>',
          ]),
        };
      case 8: // mixed formats
        return {
          content: `Action: search_logs\nAction Input: {}\n<tool_call>${body}</tool_call>\n${this.json({ name: 'print_results', parameters: {} })}`,
        };
      case 9: // huge strings
        return this.chance(0.5)
          ? {
              content: `<tool_call>${this.json({ name: 'search_traces', arguments: { parent_span_id: 'f'.repeat(20_000 + this.int(80_000)) } })}</tool_call>`,
            }
          : { content: this.junk(5_000 + this.int(30_000)) };
      case 10: // unicode
        return {
          content: `${this.pick(UNICODE)}<tool_call>${this.json({ name: this.pick(UNICODE), arguments: { parent_span_id: this.pick(UNICODE) } })}</tool_call>${this.pick(UNICODE)}`,
        };
      case 11: // malformed OpenAI tool_calls
        return {
          content: '',
          tool_calls: this.pick<unknown>([
            [null],
            [{}],
            [{ function: { name: 'search_traces', arguments: '{"parent_span_id": ' } }],
            [{ id: 7, function: { name: 'search_logs', arguments: { a: 1 } } }],
            'x',
            [1, 2],
          ]) as never,
        };
      case 12: // brace soup and python dicts
        return {
          content: this.pick([
            '{'.repeat(200 + this.int(2000)),
            `{'name': 'search_traces', 'arguments': {'parent_span_id': 'x'}}`,
            '{"name": 1, "parameters": 2}',
            '[]',
            'null',
          ]),
        };
      case 13: // plain text, empty, whitespace
        return {
          content: this.pick(['', ' \n\t', 'The root cause is the order service.', this.junk(200), 'Final Answer: ts-order-service']),
        };
      case 14: // several calls in one message
        return { content: `<tool_call>${body}</tool_call><tool_call>${this.json(this.callObject(w))}</tool_call>` };
      default: // a valid answer in a random format
        return {
          content: `<tool_call>${this.json({ name: 'print_results', arguments: { root_causes: [{ pod: this.pick(w.pods) }] } })}</tool_call>`,
        };
    }
  }
}
