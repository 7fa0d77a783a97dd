/** Errors that point at the offending input: a data row (file:line) or a settings path. */
export class DataError extends Error {
  constructor(
    readonly file: string,
    readonly line: number,
    message: string,
  ) {
    super(`${file}:${line}: ${message}`);
    this.name = 'DataError';
  }
}

export class SettingsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SettingsError';
  }
}

/** A part of a source layout that the format requires is missing or empty: names it and what the format keeps there. */
export class LayoutError extends Error {
  constructor(
    readonly path: string,
    problem: string,
    keeps: string,
  ) {
    super(`${path} ${problem}: ${keeps}`);
    this.name = 'LayoutError';
  }
}

/** A strict import found gaps it would otherwise have imported around. */
export class GapsError extends Error {
  constructor(readonly gaps: string[]) {
    super(`the source has gaps (an import without --strict goes around them):\n  ${gaps.join('\n  ')}`);
    this.name = 'GapsError';
  }
}
