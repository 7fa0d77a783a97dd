/**
 * Log message -> masked template, and the template table that numbers them. Variable parts
 * (uuids, hex ids, times, dates, numbers) are masked so that lines of the same statement
 * share one template.
 */
import type { LogLevel, LogTemplate } from '../types';

const MASKS: [RegExp, string][] = [
  [/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi, '<UUID>'],
  [/\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?/g, '<TIME>'],
  [/\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b/g, '<TIME>'],
  [/\b\d{4}-\d{2}-\d{2}\b/g, '<DATE>'],
  [/\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b/gi, '<HEX>'],
  [/\b[A-Z]{1,2}\d{2,}\b/g, '<ID>'],
  [/\b\d+(?:\.\d+)?\b/g, '<NUM>'],
];

export function maskLog(message: string): string {
  let t = message.trim();
  for (const [re, sub] of MASKS) t = t.replace(re, sub);
  return t.replace(/\s+/g, ' ');
}

const LEVEL = /\b(ERROR|FATAL|SEVERE|WARN|WARNING|INFO|DEBUG|TRACE)\b/;

/** Level written in the text of a line, or undefined when it names none. */
export function levelInText(message: string): LogLevel | 'debug' | undefined {
  const m = LEVEL.exec(message);
  if (!m) return undefined;
  switch (m[1]) {
    case 'ERROR':
    case 'FATAL':
    case 'SEVERE':
      return 'error';
    case 'WARN':
    case 'WARNING':
      return 'warn';
    case 'INFO':
      return 'info';
    default:
      return 'debug';
  }
}

/** Assigns template ids in order of first appearance, keeping the first line as example. */
export class TemplateTable {
  private readonly ids = new Map<string, number>();
  readonly templates: LogTemplate[] = [];

  idOf(message: string): number {
    const template = maskLog(message);
    let id = this.ids.get(template);
    if (id === undefined) {
      id = this.templates.length;
      this.ids.set(template, id);
      this.templates.push({ id, template, example: message.trim() });
    }
    return id;
  }
}
