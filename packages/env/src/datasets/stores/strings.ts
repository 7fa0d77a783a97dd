/** Interning table: repeated strings are stored once and referred to by index on disk. */
export class StringTable {
  private readonly index = new Map<string, number>();
  readonly values: string[] = [];

  id(s: string): number {
    let i = this.index.get(s);
    if (i === undefined) {
      i = this.values.length;
      this.index.set(s, i);
      this.values.push(s);
    }
    return i;
  }
}
