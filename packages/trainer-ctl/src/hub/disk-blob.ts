/**
 * A file, or a byte range of it, as a Blob that reads from disk only as it is consumed: its
 * stream() is pull-based, one chunk per read request. @huggingface/hub's own file blob streams
 * through Readable.toWeb, which on Node 20 reads ahead without bound (a 3 GiB file went into
 * memory while it was hashed), so push hands the hub these instead.
 */
import { statSync } from 'node:fs';
import { open } from 'node:fs/promises';

const CHUNK = 1024 * 1024;

export class DiskBlob extends Blob {
  private constructor(
    readonly path: string,
    private readonly start: number,
    private readonly end: number,
  ) {
    super();
  }

  static of(path: string): DiskBlob {
    return new DiskBlob(path, 0, statSync(path).size);
  }

  override get size(): number {
    return this.end - this.start;
  }

  override slice(start = 0, end = this.size): Blob {
    const clamp = (x: number) => Math.min(Math.max(x < 0 ? this.size + x : x, 0), this.size);
    return new DiskBlob(this.path, this.start + clamp(start), this.start + Math.max(clamp(start), clamp(end)));
  }

  override stream(): ReturnType<Blob['stream']> {
    const { path, end } = this;
    let at = this.start;
    let file: Awaited<ReturnType<typeof open>> | undefined;
    return new ReadableStream<Uint8Array<ArrayBuffer>>(
      {
        async pull(controller) {
          file ??= await open(path, 'r');
          const n = Math.min(CHUNK, end - at);
          if (n <= 0) {
            await file.close();
            return controller.close();
          }
          const buf = new Uint8Array(n);
          const { bytesRead } = await file.read(buf, 0, n, at);
          if (bytesRead === 0) {
            await file.close();
            throw new Error(`${path}: ended at byte ${at}, before byte ${end}; was it changed while pushed?`);
          }
          at += bytesRead;
          controller.enqueue(bytesRead === n ? buf : buf.subarray(0, bytesRead));
        },
        async cancel() {
          await file?.close();
        },
      },
      { highWaterMark: 0 },
    ) as ReturnType<Blob['stream']>;
  }

  /** The whole range in memory: for the small reads the hub client makes (a file's first bytes, small files). */
  override async arrayBuffer(): Promise<ArrayBuffer> {
    const file = await open(this.path, 'r');
    try {
      const buf = Buffer.alloc(this.size);
      await file.read(buf, 0, this.size, this.start);
      return buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength) as ArrayBuffer;
    } finally {
      await file.close();
    }
  }

  override async text(): Promise<string> {
    return Buffer.from(await this.arrayBuffer()).toString('utf8');
  }
}
