/** Keeps every observation within the size limits, and says what was cut. */
import type { Observation } from '../types';
import type { ToolSettings } from './settings';

/** Keeps the first `max` items; the note says how many more there were. */
export function boundItems<T>(items: T[], max: number, noun: string): { shown: T[]; note?: string } {
  if (items.length <= max) return { shown: items };
  return { shown: items.slice(0, max), note: `[${items.length - max} more ${noun} not shown (limit ${max})]` };
}

/** Cuts text at a line boundary under `maxChars`, ending with a line that says what was cut. */
export function boundText(text: string, maxChars: number): { text: string; truncated: boolean } {
  if (text.length <= maxChars) return { text, truncated: false };
  const reserve = 80;
  const budget = Math.max(0, maxChars - reserve);
  let cut = text.lastIndexOf('\n', budget);
  if (cut <= 0) cut = budget;
  const rest = text.slice(cut);
  const lines = rest.split('\n').filter((l) => l.length > 0).length;
  return {
    text: `${text.slice(0, cut)}\n[cut: ${lines} more line(s), ${rest.length} chars over the ${maxChars}-char limit]`,
    truncated: true,
  };
}

/** A successful observation, bounded. `itemsCut` marks that a list was shortened. */
export function okObservation(
  settings: ToolSettings,
  text: string,
  data: unknown,
  components: Iterable<string>,
  itemsCut = false,
): Observation {
  const b = boundText(text, settings.max_observation_chars);
  return { ok: true, text: b.text, data, truncated: b.truncated || itemsCut, components: [...new Set(components)].sort() };
}

/** An error the model can read and act on; never thrown. */
export function errorObservation(settings: ToolSettings, error: string, components: Iterable<string> = []): Observation {
  const b = boundText(`Error: ${error}`, settings.max_observation_chars);
  return { ok: false, text: b.text, error, truncated: b.truncated, components: [...new Set(components)].sort() };
}

/** Short text for a value a model sent, so error messages stay small. */
export function shown(value: unknown, max = 60): string {
  let s: string;
  try {
    s = typeof value === 'string' ? value : (JSON.stringify(value) ?? String(value));
  } catch {
    s = String(value);
  }
  return s.length > max ? `${s.slice(0, max)}...` : s;
}
