/**
 * Registry of tool-call formats. Each format is one file that calls `registerFormat`;
 * formats are tried in priority order and the first that recognises the message decides.
 */
import type { AssistantMessage, ParsedToolCall } from '../types';
import type { ParseResult } from './call';

export interface CallFormat {
  name: ParsedToolCall['format'];
  /** Lower runs first. */
  priority: number;
  /** Whether the message is written in this format at all (its errors are then this format's). */
  detect(msg: AssistantMessage, text: string): boolean;
  /** `text` is the content with closed thinking blocks removed. */
  parse(msg: AssistantMessage, text: string): ParseResult;
}

const formats: CallFormat[] = [];

export function registerFormat(f: CallFormat): void {
  if (formats.some((x) => x.name === f.name)) throw new Error(`call format ${f.name} registered twice`);
  formats.push(f);
  formats.sort((a, b) => a.priority - b.priority);
}

export function callFormats(): readonly CallFormat[] {
  return formats;
}
