/**
 * Streamed answers (`stream: true`): server-sent events, one `data: {json}` per chunk and
 * `data: [DONE]` at the end, as OpenAI's SDKs read them. Text is released as tokens arrive,
 * except what could still turn out to be part of a stop string or of an unfinished character.
 */

/** A route's streamed answer: `run` emits the chunks; the server writes them as events. */
export class EventStream {
  constructor(readonly run: (emit: (chunk: Record<string, unknown>) => void) => Promise<void>) {}
}

/** The text of a growing token list, handed out in pieces that never need taking back. */
export class TextDeltas {
  private ids: number[] = [];
  private sent = '';

  constructor(
    private readonly decode: (ids: number[]) => string,
    /** Token ids that are not text (end of sequence). */
    private readonly hidden: (id: number) => boolean,
    private readonly stop: string[],
  ) {}

  /** The text that token `id` lets out, possibly ''. */
  push(id: number): string {
    if (!this.hidden(id)) this.ids.push(id);
    const text = this.decode(this.ids);
    // A replacement character at the end is half of a multi-byte character.
    let safe = text.endsWith('\uFFFD') ? text.slice(0, -1) : text;
    // Nothing from a stop string on; and hold back any tail that may begin one.
    for (const s of this.stop) {
      const at = safe.indexOf(s);
      if (at >= 0) safe = safe.slice(0, at);
    }
    for (const s of this.stop) {
      for (let k = Math.min(s.length, safe.length); k > 0; k--) {
        if (safe.endsWith(s.slice(0, k))) {
          safe = safe.slice(0, safe.length - k);
          break;
        }
      }
    }
    return this.take(safe);
  }

  /** The rest of the final text (the generation's own, cut at a stop string). */
  finish(final: string): string {
    return this.take(final);
  }

  private take(upTo: string): string {
    if (!upTo.startsWith(this.sent) || upTo.length <= this.sent.length) return '';
    const delta = upTo.slice(this.sent.length);
    this.sent = upTo;
    return delta;
  }
}
