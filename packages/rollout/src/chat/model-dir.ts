/**
 * Reads a model directory in the Hugging Face layout: tokenizer.json, tokenizer_config.json
 * (with its Jinja chat template, or a chat_template.jinja beside it) and config.json.
 * Errors name the file that is missing or malformed.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** A special token as tokenizer_config.json writes it: a string or an AddedToken object. */
export type SpecialToken = string | { content: string } | null | undefined;

export interface TokenizerConfig {
  chat_template?: string | { name: string; template: string }[];
  bos_token?: SpecialToken;
  eos_token?: SpecialToken;
  pad_token?: SpecialToken;
  unk_token?: SpecialToken;
  tokenizer_class?: string;
  [key: string]: unknown;
}

export interface ModelDir {
  dir: string;
  /** Parsed tokenizer.json (the tokenizers library's serialisation). */
  tokenizerJSON: Record<string, unknown>;
  tokenizerConfig: TokenizerConfig;
  /** Parsed config.json; undefined for a tokenizer-only directory. */
  config: Record<string, unknown> | undefined;
  /** The default chat template's Jinja source. */
  chatTemplate: string;
}

function readJson(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new Error(`cannot read ${path}: ${(e as Error).message}`);
  }
  try {
    const v: unknown = JSON.parse(text);
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('not a JSON object');
    return v as Record<string, unknown>;
  } catch (e) {
    throw new Error(`${path} is not valid JSON: ${(e as Error).message}`);
  }
}

/** The text of a special token setting, or undefined when unset. */
export function specialTokenText(t: SpecialToken): string | undefined {
  if (t === null || t === undefined) return undefined;
  return typeof t === 'string' ? t : t.content;
}

function pickTemplate(dir: string, cfg: TokenizerConfig): string {
  const t = cfg.chat_template;
  if (typeof t === 'string') return t;
  // Newer checkpoints store a list of named templates; "default" is the one transformers uses.
  if (Array.isArray(t)) {
    const def = t.find((x) => x.name === 'default') ?? t[0];
    if (def) return def.template;
  }
  const file = join(dir, 'chat_template.jinja');
  if (existsSync(file)) return readFileSync(file, 'utf8');
  throw new Error(`${join(dir, 'tokenizer_config.json')} has no chat_template and there is no ${file}`);
}

export function loadModelDir(dir: string): ModelDir {
  if (!existsSync(dir)) throw new Error(`model directory ${dir} does not exist`);
  const tokenizerJSON = readJson(join(dir, 'tokenizer.json'));
  if (typeof tokenizerJSON.model !== 'object' || tokenizerJSON.model === null) {
    throw new Error(`${join(dir, 'tokenizer.json')} has no "model" section`);
  }
  const tokenizerConfig = readJson(join(dir, 'tokenizer_config.json')) as TokenizerConfig;
  const configPath = join(dir, 'config.json');
  const config = existsSync(configPath) ? readJson(configPath) : undefined;
  return { dir, tokenizerJSON, tokenizerConfig, config, chatTemplate: pickTemplate(dir, tokenizerConfig) };
}
