/**
 * Per-episode short names for span ids (s1, s2, ...). Small models cannot copy 16-hex ids;
 * with aliases on, observations show the alias and the tools accept either form.
 */
export class SpanAliases {
  private readonly byId = new Map<string, string>();
  private readonly byAlias = new Map<string, string>();

  constructor(readonly enabled: boolean) {}

  /** The name a model sees for a span id: its alias (assigned on first sight) or the id itself. */
  ref(spanId: string): string {
    if (!this.enabled) return spanId;
    let a = this.byId.get(spanId);
    if (!a) {
      a = `s${this.byId.size + 1}`;
      this.byId.set(spanId, a);
      this.byAlias.set(a, spanId);
    }
    return a;
  }

  /** The span id a model meant: an alias shown earlier, or the text itself. */
  resolve(text: string): string {
    const t = text.trim();
    if (!this.enabled) return t;
    return this.byAlias.get(t.toLowerCase()) ?? t;
  }
}
