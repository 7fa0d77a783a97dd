/** Parses the tool calls of an assistant message in any supported format. Never throws. */
import type { AssistantMessage } from '../types';
import type { ParseResult } from './call';
import './formats';
import { stripThinking } from './json-scan';
import { callFormats } from './registry';

/** Format-neutral: the chat template, not this text, teaches each model its call syntax. */
export const NO_CALL_ERROR = 'no tool call found in the message';

export function parseToolCalls(msg: AssistantMessage): ParseResult {
  try {
    const content = typeof msg.content === 'string' ? msg.content : '';
    const text = stripThinking(content);
    for (const f of callFormats()) {
      if (f.detect(msg, text)) return f.parse(msg, text);
    }
    return { ok: false, error: NO_CALL_ERROR };
  } catch (e) {
    return { ok: false, error: `unparsable message: ${(e as Error).message ?? String(e)}` };
  }
}
