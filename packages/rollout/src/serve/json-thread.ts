/**
 * Request bodies parsed as JSON off the event loop when they are large: parsing 30 MB takes
 * ~0.1 s on an idle core and many times that on a busy one, time in which no other request
 * would be answered. The parsed value comes back by structured clone, a copy without parsing,
 * except that arrays of more than 4096 numbers (millions of token ids) come back as
 * Float64Arrays, moved without a copy: their length can be checked before anything is paid
 * for their elements, and unpacked() turns them back into arrays.
 */
import { Worker } from 'node:worker_threads';

const ENTRY = new URL('./json-thread-main.mjs', import.meta.url);

/** Bodies up to this many bytes are parsed in place: less than a trip to the thread. */
const INLINE_BYTES = 256 * 1024;

/** The body is not valid JSON; the message is JSON.parse's. */
export class InvalidJson extends Error {}

interface Reply {
  id: number;
  body?: unknown;
  error?: string;
}

/** `value` with every Float64Array the JSON thread packed turned back into an array. */
export function unpacked(value: unknown, depth = 0): unknown {
  if (value instanceof Float64Array) return Array.from(value);
  if (depth > 4 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((x) => unpacked(x, depth + 1));
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, unpacked(v, depth + 1)]));
}

export class JsonThread {
  private worker: Worker | undefined;
  private next = 0;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();

  async parse(bytes: Buffer): Promise<unknown> {
    if (bytes.length <= INLINE_BYTES) {
      try {
        return JSON.parse(bytes.toString('utf8'));
      } catch (e) {
        throw new InvalidJson((e as Error).message);
      }
    }
    const worker = this.started();
    // Transferred, not copied: a buffer of its own (Buffer.concat of a large body is one).
    const own =
      bytes.byteOffset === 0 && bytes.buffer.byteLength === bytes.length
        ? bytes.buffer
        : bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length);
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      worker.postMessage({ id, bytes: own }, [own as ArrayBuffer]);
    });
  }

  async close(): Promise<void> {
    await this.worker?.terminate();
  }

  /** Started on the first large body; an idle thread does not keep the process alive. */
  private started(): Worker {
    if (this.worker) return this.worker;
    const w = new Worker(ENTRY);
    w.unref();
    w.on('message', (m: Reply) => {
      const p = this.pending.get(m.id);
      this.pending.delete(m.id);
      if (m.error !== undefined) p?.reject(new InvalidJson(m.error));
      else p?.resolve(m.body);
    });
    const fail = (e: Error) => {
      this.worker = undefined;
      for (const p of this.pending.values()) p.reject(e);
      this.pending.clear();
    };
    w.on('error', fail);
    w.on('exit', (code) => fail(new Error(`JSON thread exited (code ${code})`)));
    this.worker = w;
    return w;
  }
}
