/**
 * The vocabulary a tiny model's tokenizer is fitted to: the environment's own names (services,
 * pods, nodes, operations, tools), the words of its prompts and tool results, JSON chunks and
 * numbers as 1-3 digit chunks. A measured prototype (../shared/notes/tiny-model.md) found that
 * single-token names and 3-digit chunks are what let a ~1M-parameter model copy ids and times.
 */
import type { Dataset, ToolSpec } from '@thinkfl/env';

export interface TinyVocabulary {
  /** Whole names the model must copy: one token each. */
  names: string[];
  /** Words of prompts, tool descriptions and observations. */
  words: string[];
  /** Frequent runs of punctuation and spaces (compact JSON, separators). */
  symbols: string[];
}

/** JSON punctuation as tojson and tool results write it (", " and ": " separators). */
export const JSON_CHUNKS = [
  '{"',
  '"}',
  '":',
  '": "',
  '", "',
  '": {"',
  '"}}',
  '"}]',
  '"]',
  '["',
  '}}',
  ']}',
  '}]',
  '"}]}',
  '}]}',
  ', "',
  '": [',
  '": [{"',
  '"}, {"',
  '}, {"',
  '": ',
  '": {',
  '"]}',
  '": ["',
  '"},',
  '},',
  '],',
];

/** Digit chunks 0-9, 00-99 and 000-999: numbers are split left to right into 1-3 digits. */
export function digitChunks(): string[] {
  const out: string[] = [];
  for (let n = 1; n <= 3; n++) {
    for (let i = 0; i < 10 ** n; i++) out.push(String(i).padStart(n, '0'));
  }
  return out;
}

function schemaWords(schema: unknown, into: string[]): void {
  if (typeof schema !== 'object' || schema === null) return;
  const s = schema as Record<string, unknown>;
  if (typeof s.description === 'string') into.push(s.description);
  if (typeof s.properties === 'object' && s.properties !== null) {
    for (const [k, v] of Object.entries(s.properties)) {
      into.push(k);
      schemaWords(v, into);
    }
  }
  if (s.items) schemaWords(s.items, into);
}

/** Pieces matching `re` seen at least `minCount` times, most frequent first; at most `limit`. */
export function frequentPieces(texts: readonly string[], re: RegExp, limit: number, minCount = 2): string[] {
  const counts = new Map<string, number>();
  for (const t of texts) {
    for (const w of t.match(re) ?? []) counts.set(w, (counts.get(w) ?? 0) + 1);
  }
  return [...counts.entries()]
    .filter(([, n]) => n >= minCount)
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .slice(0, limit)
    .map(([w]) => w);
}

/** Size limits of the fitted parts (the prototype's vocabulary was ~1.6k in all). */
export interface FitLimits {
  /** Most frequent words kept (default 250). */
  words: number;
  /** Most frequent punctuation/space runs kept (default 80). */
  symbols: number;
}

/** Every operation name in the dataset's spans. */
export function datasetOperations(ds: Dataset): string[] {
  const ops = new Set<string>();
  for (const id of ds.traces.traceIds()) for (const s of ds.traces.trace(id)) ops.add(s.operation);
  return [...ops].sort();
}

/**
 * Fits the vocabulary: names from the dataset and tools, words from the given texts (prompts,
 * observations) and the tools' descriptions and argument names.
 */
export function fitVocabulary(
  ds: Dataset,
  tools: readonly ToolSpec[],
  texts: readonly string[],
  limits: FitLimits = { words: 250, symbols: 80 },
): TinyVocabulary {
  const t = ds.topology;
  const names = new Set<string>([
    ...t.services,
    ...t.pods.map((p) => p.pod),
    ...t.nodes,
    ...datasetOperations(ds),
    ...tools.map((x) => x.name),
  ]);
  const toolTexts: string[] = [];
  for (const x of tools) {
    toolTexts.push(x.description);
    schemaWords(x.parameters, toolTexts);
  }
  names.delete('');
  const all = [...toolTexts, ...texts];
  return {
    names: [...names].sort(),
    words: frequentPieces(all, /[A-Za-z_]{2,}/g, limits.words),
    symbols: frequentPieces(all, /[^A-Za-z0-9]{2,8}/g, limits.symbols, 3),
  };
}
