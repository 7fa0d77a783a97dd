/**
 * The backbone's own tokenizer (tokenizer.json through @lenml/tokenizers, a dependency-free
 * port of transformers.js' tokenizers). Text in, ids out, nothing added: the chat template
 * already writes every special token, as transformers' apply_chat_template assumes.
 */
import { TokenizerLoader } from '@lenml/tokenizers';
import { loadModelDir, specialTokenText, type ModelDir } from './model-dir';

interface LenmlTokenizer {
  encode(text: string, opts: { add_special_tokens: boolean }): number[];
  decode(ids: number[], opts: { skip_special_tokens: boolean; clean_up_tokenization_spaces: boolean }): string;
  model: { tokens_to_ids: Map<string, number>; vocab: string[] };
}

export class Tokenizer {
  private readonly inner: LenmlTokenizer;
  /** Text of the end-of-sequence token (eos_token of tokenizer_config.json). */
  readonly eosToken: string | undefined;
  readonly bosToken: string | undefined;

  constructor(readonly modelDir: ModelDir) {
    const { tokenizerJSON, tokenizerConfig } = modelDir;
    try {
      this.inner = TokenizerLoader.fromPreTrained({
        tokenizerJSON: tokenizerJSON as never,
        tokenizerConfig: tokenizerConfig as never,
      }) as unknown as LenmlTokenizer;
    } catch (e) {
      throw new Error(`cannot build the tokenizer of ${modelDir.dir}: ${(e as Error).message}`);
    }
    this.eosToken = specialTokenText(tokenizerConfig.eos_token);
    this.bosToken = specialTokenText(tokenizerConfig.bos_token);
  }

  /** Number of ids (model vocabulary plus added tokens). */
  get size(): number {
    return this.inner.model.vocab.length;
  }

  /**
   * Most characters (UTF-16 units) of input text one token can stand for, so a text of n
   * characters has at least ceil(n / maxCharsPerToken) tokens: a bound checked before paying
   * for tokenization. The longest vocabulary entry (byte-level entries count one character per
   * byte, which is at least one UTF-16 unit); times 4 behind a normalizer, whose Unicode
   * composition may shrink text; Infinity where unknown text can fuse into one token.
   */
  get maxCharsPerToken(): number {
    const json = this.modelDir.tokenizerJSON as {
      normalizer?: unknown;
      model?: { unk_token?: unknown; fuse_unk?: boolean; byte_fallback?: boolean; max_input_chars_per_word?: number };
    };
    const m = json.model ?? {};
    if (m.unk_token != null && m.fuse_unk && !m.byte_fallback) return Infinity;
    const longest = Math.max(1, m.max_input_chars_per_word ?? 1, ...this.inner.model.vocab.map((t) => t.length));
    return json.normalizer ? 4 * longest : longest;
  }

  encode(text: string): number[] {
    if (text.length === 0) return [];
    return this.inner.encode(text, { add_special_tokens: false });
  }

  /** Exact inverse of encode for text the tokenizer can represent: no space clean-up. */
  decode(ids: readonly number[]): string {
    if (ids.length === 0) return '';
    return this.inner.decode([...ids], { skip_special_tokens: false, clean_up_tokenization_spaces: false });
  }

  /** Id of a token given by its text, e.g. "<|im_end|>"; undefined when not in the vocabulary. */
  tokenId(token: string): number | undefined {
    return this.inner.model.tokens_to_ids.get(token);
  }

  /** Id of a token that must exist; the error names the model directory. */
  requireId(token: string): number {
    const id = this.tokenId(token);
    if (id === undefined) throw new Error(`token ${JSON.stringify(token)} is not in the vocabulary of ${this.modelDir.dir}`);
    return id;
  }
}

export function loadTokenizer(dirOrModel: string | ModelDir): Tokenizer {
  return new Tokenizer(typeof dirOrModel === 'string' ? loadModelDir(dirOrModel) : dirOrModel);
}
