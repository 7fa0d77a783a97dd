/**
 * JSON sources with line numbers in their errors. JSON.parse does the parsing; only when it
 * fails, or when an importer rejects a value, a small scanner walks the text again to find the
 * line (JSON.parse's messages carry no line, and often no position).
 */
import { DataError } from './errors';

export type JsonPath = (string | number)[];

class ScanError extends Error {
  constructor(
    readonly at: number,
    message: string,
  ) {
    super(message);
  }
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const ESCAPE = /\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})/y;

/** Validating scan of one JSON text; records where the value at `target` starts. */
class Scanner {
  private i = 0;
  found: number | undefined;

  constructor(
    private readonly text: string,
    private readonly target: JsonPath,
  ) {}

  document(): void {
    this.value([]);
    this.space();
    if (this.i < this.text.length) this.fail('unexpected text after the JSON value');
  }

  private fail(message: string): never {
    throw new ScanError(this.i, message);
  }

  private space() {
    while (this.i < this.text.length && ' \t\n\r'.includes(this.text[this.i])) this.i++;
  }

  private onTarget(path: JsonPath | null): path is JsonPath {
    return path !== null && path.length <= this.target.length && path.every((p, k) => p === this.target[k]);
  }

  private value(path: JsonPath | null) {
    this.space();
    if (this.onTarget(path) && path.length === this.target.length) this.found ??= this.i;
    const c = this.text[this.i];
    if (c === '{') this.object(path);
    else if (c === '[') this.array(path);
    else if (c === '"') this.string();
    else if (c === undefined) this.fail('unexpected end of the text');
    else {
      for (const word of ['true', 'false', 'null']) {
        if (this.text.startsWith(word, this.i)) {
          this.i += word.length;
          return;
        }
      }
      NUMBER.lastIndex = this.i;
      if (!NUMBER.test(this.text)) this.fail(`unexpected character '${c}'`);
      this.i = NUMBER.lastIndex;
    }
  }

  private string(): string {
    const from = this.i++;
    for (;;) {
      const c = this.text[this.i];
      if (c === undefined) this.fail('unterminated string');
      if (c === '"') break;
      if (c === '\\') {
        ESCAPE.lastIndex = this.i;
        if (!ESCAPE.test(this.text)) this.fail('bad escape in a string');
        this.i = ESCAPE.lastIndex;
      } else if (c < ' ') this.fail('control character in a string');
      else this.i++;
    }
    this.i++;
    return JSON.parse(this.text.slice(from, this.i)) as string;
  }

  private object(path: JsonPath | null) {
    this.i++;
    this.space();
    if (this.text[this.i] === '}') {
      this.i++;
      return;
    }
    for (;;) {
      this.space();
      if (this.text[this.i] !== '"') this.fail('expected a property name');
      const key = this.string();
      this.space();
      if (this.text[this.i] !== ':') this.fail("expected ':'");
      this.i++;
      this.value(this.onTarget(path) ? [...path, key] : null);
      this.space();
      const c = this.text[this.i++];
      if (c === '}') return;
      if (c !== ',') this.fail("expected ',' or '}'");
    }
  }

  private array(path: JsonPath | null) {
    this.i++;
    this.space();
    if (this.text[this.i] === ']') {
      this.i++;
      return;
    }
    for (let k = 0; ; k++) {
      this.value(this.onTarget(path) ? [...path, k] : null);
      this.space();
      const c = this.text[this.i++];
      if (c === ']') return;
      if (c !== ',') this.fail("expected ',' or ']'");
    }
  }
}

function lineAt(text: string, offset: number): number {
  let n = 0;
  for (let i = text.indexOf('\n'); i >= 0 && i < offset; i = text.indexOf('\n', i + 1)) n++;
  return n;
}

/** Parses `text` (which starts at line `firstLine` of `file`); a syntax error names its line. */
export function parseJson(file: string, text: string, firstLine = 1): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    try {
      new Scanner(text, []).document();
    } catch (s) {
      // An early end is reported on the last line that holds anything.
      if (s instanceof ScanError)
        throw new DataError(file, firstLine + lineAt(text, Math.min(s.at, text.trimEnd().length - 1)), `not JSON: ${s.message}`);
      throw s;
    }
    throw new DataError(file, firstLine, `not JSON: ${(e as Error).message}`);
  }
}

/** Line where the value at `path` starts in `text` (valid JSON starting at line `firstLine`). */
export function jsonLine(text: string, path: JsonPath, firstLine = 1): number {
  const s = new Scanner(text, path);
  s.document();
  return firstLine + lineAt(text, s.found ?? 0);
}

/** A DataError at the value `path` of a parsed JSON text. */
export function jsonError(file: string, text: string, path: JsonPath, message: string, firstLine = 1): DataError {
  const where = path.map((p) => (typeof p === 'number' ? `[${p}]` : `.${p}`)).join('');
  return new DataError(file, jsonLine(text, path, firstLine), `${where ? `${where.replace(/^\./, '')}: ` : ''}${message}`);
}
