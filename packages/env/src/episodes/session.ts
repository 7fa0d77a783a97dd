/**
 * The turn loop shared by all protocols: asks the policy for a message, parses its call, checks
 * it against the tools offered, runs it, and records everything. Nothing a policy returns or
 * throws escapes: a throw ends the episode with 'policy_error'.
 */
import { parseToolCalls } from '../parsing/parse';
import type { PrintResultsData } from '../tools/print-results';
import type { Toolbox } from '../tools/toolbox';
import type {
  AssistantMessage,
  Case,
  ChatMessage,
  EpisodeRecord,
  OpenAIToolCall,
  ParsedToolCall,
  PathStep,
  Policy,
  RootCause,
  ToolCallRecord,
  TurnRecord,
} from '../types';
import { canonicalJson } from './canonical';

/** A free-text turn (no tool offered): the message, or the policy's failure. */
export type TextOutcome = { kind: 'text'; content: string } | { kind: 'policy_error' };

export type TurnOutcome =
  | { kind: 'answered'; answer: RootCause[] }
  | { kind: 'called'; call: ToolCallRecord; newStep: boolean }
  | { kind: 'rejected' }
  | { kind: 'policy_error' };

const RAW_KEEP = 2000;

function jsonText(v: unknown): string {
  try {
    return JSON.stringify(v) ?? '';
  } catch {
    return '';
  }
}

/** An OpenAI tool call in the contract's shape whatever the policy returned (graders read it). */
function toolCall(tc: unknown, turn: number, i: number): OpenAIToolCall {
  const o = (typeof tc === 'object' && tc !== null ? tc : {}) as Record<string, unknown>;
  const fn = (typeof o.function === 'object' && o.function !== null ? o.function : {}) as Record<string, unknown>;
  const args = fn.arguments;
  return {
    id: typeof o.id === 'string' && o.id ? o.id : `call_${turn}_${i}`,
    type: 'function',
    function: {
      name: typeof fn.name === 'string' ? fn.name : '',
      arguments: typeof args === 'string' ? args : args === undefined ? '' : jsonText(args),
    },
  };
}

/** A policy's reply made safe: an object with string content and well-formed tool calls. */
function sanitize(m: unknown, turn: number): AssistantMessage {
  if (typeof m !== 'object' || m === null) return { content: typeof m === 'string' ? m : '' };
  const o = m as { content?: unknown; tool_calls?: unknown };
  const out: AssistantMessage = { content: typeof o.content === 'string' ? o.content : '' };
  if (Array.isArray(o.tool_calls) && o.tool_calls.length) out.tool_calls = o.tool_calls.map((tc, i) => toolCall(tc, turn, i));
  return out;
}

export class EpisodeSession {
  readonly messages: ChatMessage[] = [];
  readonly toolCalls: ToolCallRecord[] = [];
  readonly turns: TurnRecord[] = [];
  readonly parseErrors: EpisodeRecord['parse_errors'] = [];
  readonly path: PathStep[] = [];
  private readonly startedAt = Date.now();
  private readonly seenSteps = new Set<string>();
  /** The policy's error, once a turn ended with 'policy_error'. */
  private policyError?: string;
  /** What the protocol shows policies as structured data (PolicyContext.environment). */
  environment?: unknown;

  constructor(
    readonly kase: Case,
    readonly policy: Policy,
    readonly toolbox: Toolbox,
    /** The episode settings' d_max, which every policy is told (PolicyContext.d_max). */
    readonly d_max: number,
  ) {}

  /** A system or user message, pod names shown as the toolbox shows them (their aliases when on). */
  say(role: 'system' | 'user', content: string): void {
    this.messages.push({ role, content: this.toolbox.shown(content) });
  }

  /** Adds a line to the latest message (a tool result or an error): what the policy reads next. */
  noteOnLast(text: string): void {
    const last = this.messages.at(-1);
    if (last && last.role !== 'assistant') last.content = `${last.content}\n${this.toolbox.shown(text)}`;
  }

  private async ask(offered: readonly string[], final: boolean, turn: number): Promise<AssistantMessage | undefined> {
    try {
      const msg = sanitize(
        await this.policy.next({
          case: this.kase,
          messages: [...this.messages],
          tools: this.toolbox.specs(offered),
          toolCalls: [...this.toolCalls],
          turn,
          final,
          d_max: this.d_max,
          ...(this.environment !== undefined ? { environment: this.environment } : {}),
          ...(this.toolbox.settings.pod_aliases ? { show: (text: string) => this.toolbox.shown(text) } : {}),
        }),
        turn,
      );
      this.messages.push({ role: 'assistant', content: msg.content, ...(msg.tool_calls ? { tool_calls: msg.tool_calls } : {}) });
      return msg;
    } catch (e) {
      this.policyError = e instanceof Error ? e.message : String(e);
      return undefined;
    }
  }

  /**
   * One assistant turn that offers no tool (ORACL's single tagged turn): the protocol reads the
   * text and reports how it parsed with `recordText`.
   */
  async text(final: boolean): Promise<TextOutcome> {
    const msg = await this.ask([], final, this.turns.length);
    return msg ? { kind: 'text', content: msg.content } : { kind: 'policy_error' };
  }

  /** Records how the protocol read the latest free-text turn; an error is a parse error of that turn. */
  recordText(error?: string): void {
    const turn = this.turns.length;
    if (error === undefined) {
      this.turns.push({ turn, offered: [], parsed: true, offered_tool: true, args_valid: true });
      return;
    }
    this.turns.push({ turn, offered: [], parsed: false, offered_tool: false, args_valid: false, error });
    const raw = this.messages.at(-1)?.content ?? '';
    this.parseErrors.push({ turn, message: error, raw: raw.slice(0, RAW_KEEP) });
  }

  /** One assistant turn with the given tools offered. */
  async turn(offered: readonly string[], final: boolean): Promise<TurnOutcome> {
    const turn = this.turns.length;
    const msg = await this.ask(offered, final, turn);
    if (!msg) return { kind: 'policy_error' };
    const parsed = parseToolCalls(msg);
    if (!parsed.ok) return this.reject(turn, offered, msg, { parsed: false, offered_tool: false }, parsed.error);
    const [call, ...extra] = parsed.calls;
    const callId = this.callId(msg, 0, turn);
    if (!offered.includes(call.name)) {
      const error = `tool "${call.name.slice(0, 60)}" is not offered on this turn; offered: ${offered.join(', ')}`;
      return this.reject(turn, offered, msg, { parsed: true, offered_tool: false }, error, { call, callId, extra: extra.length });
    }
    const args = this.toolbox.validate(call.name, call.arguments);
    if (!args.ok) {
      return this.reject(turn, offered, msg, { parsed: true, offered_tool: true }, args.error, { call, callId, extra: extra.length });
    }
    this.turns.push({ turn, offered: [...offered], parsed: true, offered_tool: true, args_valid: true });
    const observation = this.toolbox.run(call.name, args.args);
    const record: ToolCallRecord = { turn, name: call.name, arguments: args.args, observation };
    this.toolCalls.push(record);
    const note = extra.length ? `\n[${extra.length} more call(s) in this message ignored: one call per turn]` : '';
    this.messages.push({ role: 'tool', name: call.name, tool_call_id: callId, content: observation.text + note });
    this.ignoreExtra(msg, extra.length, turn);
    if (this.toolbox.isTerminal(call.name)) {
      const answer = observation.ok ? (observation.data as PrintResultsData | undefined)?.answer : undefined;
      return answer ? { kind: 'answered', answer } : { kind: 'called', call: record, newStep: false };
    }
    const step: PathStep = {
      tool: call.name,
      args: canonicalJson(this.toolbox.canonical(call.name, args.args)),
      components: [...new Set([...this.toolbox.argComponents(call.name, args.args), ...observation.components])].sort(),
    };
    this.path.push(step);
    const key = `${step.tool} ${step.args}`;
    const newStep = observation.ok && !this.seenSteps.has(key);
    this.seenSteps.add(key);
    return { kind: 'called', call: record, newStep };
  }

  finish(protocol: string, stopReason: EpisodeRecord['stop_reason'], answer: RootCause[] | null): EpisodeRecord {
    return {
      ...(this.policyError !== undefined ? { error: this.policyError } : {}),
      case_id: this.kase.id,
      protocol,
      messages: this.messages,
      tool_calls: this.toolCalls,
      turns: this.turns,
      parse_errors: this.parseErrors,
      answer,
      path: this.path,
      stop_reason: stopReason,
      timing: { started_at: this.startedAt, wall_ms: Date.now() - this.startedAt },
    };
  }

  private callId(msg: AssistantMessage, i: number, turn: number): string {
    return msg.tool_calls?.[i]?.id ?? `call_${turn}_${i}`;
  }

  /** OpenAI clients need an answer to every tool_call id, even the ignored ones. */
  private ignoreExtra(msg: AssistantMessage, extra: number, turn: number): void {
    if (!msg.tool_calls) return;
    for (let i = 1; i <= extra; i++) {
      this.messages.push({ role: 'tool', tool_call_id: this.callId(msg, i, turn), content: 'Ignored: one tool call per turn.' });
    }
  }

  private reject(
    turn: number,
    offered: readonly string[],
    msg: AssistantMessage,
    flags: { parsed: boolean; offered_tool: boolean },
    error: string,
    parsed?: { call: ParsedToolCall; callId: string; extra: number },
  ): TurnOutcome {
    this.turns.push({ turn, offered: [...offered], ...flags, args_valid: false, error });
    const raw = msg.content || (msg.tool_calls ? jsonText(msg.tool_calls) : '');
    this.parseErrors.push({ turn, message: error, raw: raw.slice(0, RAW_KEEP) });
    const text = `Error: ${error}. Call one of: ${offered.join(', ')}.`;
    if (parsed) {
      this.messages.push({ role: 'tool', name: parsed.call.name.slice(0, 100), tool_call_id: parsed.callId, content: text });
      this.ignoreExtra(msg, parsed.extra, turn);
    } else if (msg.tool_calls) {
      msg.tool_calls.forEach((_, i) => this.messages.push({ role: 'tool', tool_call_id: this.callId(msg, i, turn), content: text }));
    } else this.messages.push({ role: 'user', content: text });
    return { kind: 'rejected' };
  }
}
