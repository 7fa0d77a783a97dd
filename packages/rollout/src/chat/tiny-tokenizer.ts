/**
 * Writes a tiny model's tokenizer in the same model-directory layout as a real backbone:
 * tokenizer.json (a BPE model with no merges: the pre-tokenizer isolates whole names, words,
 * JSON chunks and 1-3 digit chunks, `ignore_merges` looks each piece up whole, anything else
 * goes by character and then by byte, so every text round-trips) and tokenizer_config.json
 * with a small Hermes-style chat template that carries tools.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  createExpert,
  ExpertSettingsSchema,
  getTool,
  loadDataset,
  runEpisode,
  toolNames,
  toolSpec,
  type Dataset,
  type ToolSpec,
} from '@thinkfl/env';
import { digitChunks, fitVocabulary, JSON_CHUNKS, type TinyVocabulary } from './tiny-vocab';

/** Special tokens, ids 0.. in this order. The tool-call tags are plain text for decoding. */
const SPECIALS: { content: string; special: boolean }[] = [
  { content: '<|endoftext|>', special: true },
  { content: '<|im_start|>', special: true },
  { content: '<|im_end|>', special: true },
  { content: '<tool_call>', special: false },
  { content: '</tool_call>', special: false },
];

/** Hermes-style: system + tools, <tool_call> JSON in assistant content, results in a tool turn. */
export const TINY_CHAT_TEMPLATE = [
  "{%- if messages[0].role == 'system' %}",
  '{%- set system_message = messages[0].content %}{%- set loop_messages = messages[1:] %}',
  "{%- else %}{%- set system_message = '' %}{%- set loop_messages = messages %}{%- endif %}",
  "{{- '<|im_start|>system\\n' + system_message }}",
  "{%- if tools %}{{- '\\n<tools>' }}{%- for tool in tools %}{{- '\\n' + (tool.function | tojson) }}{%- endfor %}{{- '\\n</tools>' }}{%- endif %}",
  "{{- '<|im_end|>\\n' }}",
  '{%- for message in loop_messages %}',
  "{%- if message.role == 'assistant' %}",
  "{{- '<|im_start|>assistant\\n' + message.content }}",
  '{%- if message.tool_calls %}{%- for tc in message.tool_calls %}',
  '{{- \'<tool_call>{"name": "\' + tc.function.name + \'", "arguments": \' + (tc.function.arguments | tojson) + \'}</tool_call>\' }}',
  '{%- endfor %}{%- endif %}',
  "{{- '<|im_end|>\\n' }}",
  '{%- else %}',
  "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}",
  '{%- endif %}',
  '{%- endfor %}',
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
].join('\n');

/** Words and tags the chat template itself writes. */
const TEMPLATE_WORDS = ['system', 'user', 'assistant', 'tool', '<tools>', '</tools>', 'name', 'arguments', 'description', 'parameters'];

const ASCII = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).concat(['\n', '\t']);
const BYTES = Array.from({ length: 256 }, (_, i) => `<0x${i.toString(16).toUpperCase().padStart(2, '0')}>`);

function escapeRegex(s: string): string {
  // Only syntax characters: the pattern is compiled with the 'u' flag, which rejects others.
  return s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
}

export interface TinyTokenizerFiles {
  tokenizerJSON: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
  vocabSize: number;
  eosTokenId: number;
  padTokenId: number;
}

export function buildTinyTokenizer(v: TinyVocabulary): TinyTokenizerFiles {
  // A Map, not an object: harvested words such as "constructor" must not hit Object.prototype.
  const ids = new Map<string, number>();
  const pieces = [...TEMPLATE_WORDS, ...JSON_CHUNKS, ...v.names, ...v.words, ...v.symbols];
  for (const t of [...SPECIALS.map((s) => s.content), ...BYTES, ...ASCII, ...digitChunks(), ...pieces]) {
    if (!ids.has(t)) ids.set(t, ids.size);
  }
  const vocab = Object.fromEntries(ids);
  // First alternative that matches wins: longer pieces before their prefixes.
  const whole = [...new Set(pieces)].sort((a, b) => b.length - a.length || (a < b ? -1 : 1));
  const pattern = [...whole.map(escapeRegex), '\\d{1,3}', '[A-Za-z_]+'].join('|');
  const tokenizerJSON = {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: SPECIALS.map((s, id) => ({
      id,
      content: s.content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: s.special,
    })),
    normalizer: null,
    pre_tokenizer: { type: 'Split', pattern: { Regex: pattern }, behavior: 'Isolated', invert: false },
    post_processor: null,
    decoder: { type: 'Sequence', decoders: [{ type: 'ByteFallback' }, { type: 'Fuse' }] },
    model: {
      type: 'BPE',
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: true,
      ignore_merges: true,
      vocab,
      merges: [],
    },
  };
  const tokenizerConfig = {
    add_bos_token: false,
    add_eos_token: false,
    added_tokens_decoder: Object.fromEntries(
      SPECIALS.map((s, id) => [
        String(id),
        { content: s.content, lstrip: false, normalized: false, rstrip: false, single_word: false, special: s.special },
      ]),
    ),
    bos_token: null,
    eos_token: '<|im_end|>',
    pad_token: '<|endoftext|>',
    unk_token: null,
    chat_template: TINY_CHAT_TEMPLATE,
    clean_up_tokenization_spaces: false,
    model_max_length: 8192,
    tokenizer_class: 'PreTrainedTokenizerFast',
  };
  return { tokenizerJSON, tokenizerConfig, vocabSize: ids.size, eosTokenId: ids.get('<|im_end|>')!, padTokenId: ids.get('<|endoftext|>')! };
}

/** Specs of every registered tool, as episodes offer them. */
export function allToolSpecs(): ToolSpec[] {
  return toolNames().map((n) => toolSpec(getTool(n)!));
}

/**
 * What a tiny model reads and writes: every message of scripted-expert episodes on up to
 * `count` cases spread over the dataset (prompts, tool results, calls).
 */
export async function expertTexts(ds: Dataset, count: number): Promise<string[]> {
  const texts: string[] = [];
  const step = Math.max(1, Math.floor(ds.cases.length / count));
  for (let i = 0, n = 0; i < ds.cases.length && n < count; i += step, n++) {
    const policy = createExpert(ds, ExpertSettingsSchema.parse({}));
    const rec = await runEpisode({ dataset: ds, case: ds.cases[i], policy });
    texts.push(...rec.messages.map((m) => m.content));
  }
  return texts;
}

/**
 * Fits the tokenizer to an imported dataset and writes tokenizer.json and tokenizer_config.json
 * into outDir (the tiny model's directory; its config.json and weights are the engine's).
 */
export async function writeTinyTokenizer(
  outDir: string,
  datasetDir: string,
  episodes = 40,
): Promise<Omit<TinyTokenizerFiles, 'tokenizerJSON' | 'tokenizerConfig'>> {
  const ds = await loadDataset(datasetDir);
  const vocab = fitVocabulary(ds, allToolSpecs(), await expertTexts(ds, episodes));
  const files = buildTinyTokenizer(vocab);
  mkdirSync(outDir, { recursive: true });
  writeFileSync(join(outDir, 'tokenizer.json'), JSON.stringify(files.tokenizerJSON));
  writeFileSync(join(outDir, 'tokenizer_config.json'), `${JSON.stringify(files.tokenizerConfig, null, 2)}\n`);
  return { vocabSize: files.vocabSize, eosTokenId: files.eosTokenId, padTokenId: files.padTokenId };
}
