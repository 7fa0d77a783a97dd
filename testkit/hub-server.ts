/**
 * A local HTTP server speaking the part of the Hugging Face Hub's protocol that
 * @huggingface/hub and trainer-ctl use: file listing (GET /api/models/<id>/tree/<rev>, with
 * git blob SHA-1 and LFS SHA-256 checksums), file download with Range requests
 * (GET /<id>/resolve/<rev>/<path>), repository creation, preupload, the LFS batch API with
 * basic PUT transfers and, for objects larger than `partBytes`, the hub's multipart transfers
 * (a `chunk_size` header with one PUT URL per part, each answered with an ETag, then a
 * completion POST listing the parts), and NDJSON commits. Uploads are streamed to disk and
 * hashed as they arrive; an object whose SHA-256 is not its oid is refused, as the hub's LFS
 * storage does. Repositories can be gated (a token needed), and a file can be served cut after
 * some bytes (an interrupted download) or with a flipped byte (a checksum mismatch).
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';

export interface HubRepo {
  /** Regular files, and LFS files up to IN_MEMORY_BYTES, by path. */
  files: Map<string, Buffer>;
  /** Every LFS file committed, by path: its oid (SHA-256) and size as stored, whatever its size. */
  lfs?: Map<string, { oid: string; size: number }>;
  /** Tokens allowed to read; none: public. */
  gatedFor?: string[];
}

export interface LocalHubOptions {
  /** LFS objects larger than this go up in parts of this size (the hub's multipart transfer). Default 64 MiB. */
  partBytes?: number;
}

/** Committed LFS files up to this size are also kept as a Buffer in `files`, for tests to read. */
const IN_MEMORY_BYTES = 64 * 1024 * 1024;

export interface LocalHub {
  endpoint: string;
  repos: Map<string, HubRepo>;
  /** Range headers received per file path, in order ('' for none). */
  ranges: Map<string, string[]>;
  /** Next download of `path` ends (connection destroyed) after `bytes` bytes of the body. */
  cutOnce(path: string, bytes: number): void;
  /** Downloads of `path` have one byte flipped until cleared. */
  corrupt(path: string, on: boolean): void;
  /** Commits received: title and files. */
  commits: { title: string; paths: string[] }[];
  close(): Promise<void>;
}

/** Stored in LFS, as the hub's .gitattributes puts weight files. */
const isLfs = (path: string) => /\.(safetensors|bin|onnx)$/.test(path);
const sha = (algo: string, b: Buffer, prefix = '') => createHash(algo).update(prefix).update(b).digest('hex');

async function body(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of req) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

/** Streams a request body into `file`; its size and digest (sha256 or md5) as it went by. */
async function receive(req: IncomingMessage, file: string, algo: 'sha256' | 'md5'): Promise<{ size: number; digest: string }> {
  const h = createHash(algo);
  let size = 0;
  req.on('data', (c: Buffer) => {
    h.update(c);
    size += c.length;
  });
  await pipeline(req, createWriteStream(file));
  return { size, digest: h.digest('hex') };
}

/** SHA-256 of files read one after the other, streamed. */
async function sha256Of(files: string[]): Promise<string> {
  const h = createHash('sha256');
  for (const f of files) for await (const c of createReadStream(f)) h.update(c as Buffer);
  return h.digest('hex');
}

export async function startLocalHub(opts: LocalHubOptions = {}): Promise<LocalHub> {
  const partBytes = opts.partBytes ?? 64 * 1024 * 1024;
  const store = mkdtempSync(join(tmpdir(), 'local-hub-'));
  const repos = new Map<string, HubRepo>();
  const ranges = new Map<string, string[]>();
  const cuts = new Map<string, number>();
  const corrupted = new Set<string>();
  /** Uploaded LFS objects by oid: their files on disk, in order (one, or the parts). */
  const lfsObjects = new Map<string, { files: string[]; size: number }>();
  /** Multipart uploads under way by oid: the ETag each part got. */
  const partsUnderWay = new Map<string, Map<number, string>>();
  const commits: LocalHub['commits'] = [];
  let origin = '';

  const allowed = (repo: HubRepo, req: IncomingMessage) => {
    if (!repo.gatedFor) return 200;
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1];
    if (!token) return 401;
    return repo.gatedFor.includes(token) ? 200 : 403;
  };
  const json = (res: import('node:http').ServerResponse, status: number, value: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(value));
  };

  const server: Server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', origin);
      const p = decodeURIComponent(url.pathname);
      let m: RegExpExecArray | null;
      if (req.method === 'GET' && (m = /^\/api\/models\/([^/]+\/[^/]+)\/tree\/([^/]+)$/.exec(p))) {
        const repo = repos.get(m[1]);
        if (!repo) return json(res, 404, { error: 'Repository not found' });
        const status = allowed(repo, req);
        if (status !== 200) return json(res, status, { error: `Access to model ${m[1]} is restricted.` });
        return json(
          res,
          200,
          [...repo.files].map(([path, b]) => ({
            type: 'file',
            path,
            size: b.length,
            oid: sha('sha1', b, `blob ${b.length}\0`),
            ...(isLfs(path) ? { lfs: { oid: sha('sha256', b), size: b.length, pointerSize: 134 } } : {}),
          })),
        );
      }
      if (req.method === 'GET' && (m = /^\/([^/]+\/[^/]+)\/resolve\/([^/]+)\/(.+)$/.exec(p))) {
        const repo = repos.get(m[1]);
        const file = repo?.files.get(m[3]);
        if (!repo || !file) return json(res, 404, { error: 'Entry not found' });
        const status = allowed(repo, req);
        if (status !== 200) return json(res, status, { error: 'gated' });
        const range = req.headers.range ?? '';
        ranges.set(m[3], [...(ranges.get(m[3]) ?? []), range]);
        let data = corrupted.has(m[3]) ? Buffer.from(file) : file;
        if (corrupted.has(m[3])) data[data.length >> 1] ^= 0xff;
        const from = Number(/^bytes=(\d+)-$/.exec(range)?.[1] ?? 0);
        data = data.subarray(from);
        res.writeHead(from ? 206 : 200, {
          'content-length': data.length,
          ...(from ? { 'content-range': `bytes ${from}-${file.length - 1}/${file.length}` } : {}),
        });
        const cut = cuts.get(m[3]);
        if (cut !== undefined) {
          cuts.delete(m[3]);
          res.write(data.subarray(0, cut), () => res.destroy());
          return;
        }
        return void res.end(data);
      }
      const token = /^Bearer (hf_\w+)$/.exec(req.headers.authorization ?? '')?.[1];
      if (req.method === 'POST' && p === '/api/repos/create') {
        if (!token) return json(res, 401, { error: 'Invalid credentials' });
        const b = JSON.parse((await body(req)).toString()) as { name: string; organization: string };
        const id = `${b.organization}/${b.name}`;
        if (repos.has(id)) return json(res, 409, { error: 'You already created this model repo', url: `${origin}/${id}` });
        repos.set(id, { files: new Map() });
        return json(res, 200, { url: `${origin}/${id}` });
      }
      if (req.method === 'POST' && (m = /^\/api\/models\/([^/]+\/[^/]+)\/preupload\/[^/]+$/.exec(p))) {
        const b = JSON.parse((await body(req)).toString()) as { files: { path: string }[] };
        return json(res, 200, {
          files: b.files.map((f) => ({ path: f.path, uploadMode: isLfs(f.path) ? 'lfs' : 'regular', shouldIgnore: false })),
        });
      }
      if (req.method === 'POST' && (m = /^\/([^/]+\/[^/]+)\.git\/info\/lfs\/objects\/batch$/.exec(p))) {
        const b = JSON.parse((await body(req)).toString()) as { objects: { oid: string; size: number }[]; transfers?: string[] };
        const multipart = b.transfers?.includes('multipart') ?? false;
        const upload = (o: { oid: string; size: number }) => {
          if (!multipart || o.size <= partBytes) return { href: `${origin}/lfs-upload/${o.oid}` };
          partsUnderWay.set(o.oid, new Map());
          const n = Math.ceil(o.size / partBytes);
          const parts = Object.fromEntries(
            Array.from({ length: n }, (_, i) => [String(i + 1).padStart(5, '0'), `${origin}/lfs-part/${o.oid}/${i + 1}`]),
          );
          return { href: `${origin}/lfs-complete/${o.oid}`, header: { chunk_size: String(partBytes), ...parts } };
        };
        return json(res, 200, {
          transfer: multipart ? 'multipart' : 'basic',
          objects: b.objects.map((o) => ({ ...o, actions: { upload: upload(o) } })),
        });
      }
      if (req.method === 'PUT' && (m = /^\/lfs-upload\/([0-9a-f]{64})$/.exec(p))) {
        const file = join(store, m[1]);
        const got = await receive(req, file, 'sha256');
        if (got.digest !== m[1]) {
          rmSync(file, { force: true });
          return json(res, 400, { error: `sha256 mismatch: got ${got.digest}` });
        }
        lfsObjects.set(m[1], { files: [file], size: got.size });
        res.writeHead(200);
        return void res.end();
      }
      if (req.method === 'PUT' && (m = /^\/lfs-part\/([0-9a-f]{64})\/(\d+)$/.exec(p))) {
        const parts = partsUnderWay.get(m[1]);
        if (!parts) return json(res, 404, { error: `no multipart upload of ${m[1]} under way` });
        const got = await receive(req, join(store, `${m[1]}.part-${m[2]}`), 'md5');
        const etag = `"${got.digest}"`;
        parts.set(Number(m[2]), etag);
        res.writeHead(200, { etag });
        return void res.end();
      }
      if (req.method === 'POST' && (m = /^\/lfs-complete\/([0-9a-f]{64})$/.exec(p))) {
        const oid = m[1];
        const parts = partsUnderWay.get(oid);
        const b = JSON.parse((await body(req)).toString()) as { oid: string; parts: { partNumber: number; etag: string }[] };
        if (!parts || b.oid !== oid) return json(res, 404, { error: `no multipart upload of ${oid} under way` });
        const numbers = b.parts.map((x) => x.partNumber);
        if (numbers.join() !== [...parts.keys()].sort((x, y) => x - y).join() || b.parts.some((x) => parts.get(x.partNumber) !== x.etag)) {
          return json(res, 400, { error: 'the completion does not list the parts received with their ETags' });
        }
        const files = numbers.map((n) => join(store, `${oid}.part-${n}`));
        const digest = await sha256Of(files);
        partsUnderWay.delete(oid);
        if (digest !== oid) return json(res, 400, { error: `sha256 mismatch: the parts add up to ${digest}` });
        lfsObjects.set(oid, { files, size: files.reduce((a, f) => a + statSync(f).size, 0) });
        return json(res, 200, {});
      }
      if (req.method === 'POST' && (m = /^\/api\/models\/([^/]+\/[^/]+)\/commit\/[^/]+$/.exec(p))) {
        const repo = repos.get(m[1]);
        if (!repo) return json(res, 404, { error: 'Repository not found' });
        const lines = (await body(req))
          .toString()
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as { key: string; value: Record<string, string> });
        const paths: string[] = [];
        for (const { key, value } of lines) {
          if (key === 'file') repo.files.set(value.path, Buffer.from(value.content, 'base64'));
          else if (key === 'lfsFile') {
            const obj = lfsObjects.get(value.oid);
            if (!obj) return json(res, 400, { error: `LFS object ${value.oid} was not uploaded` });
            (repo.lfs ??= new Map()).set(value.path, { oid: value.oid, size: obj.size });
            if (obj.size <= IN_MEMORY_BYTES) repo.files.set(value.path, Buffer.concat(obj.files.map((f) => readFileSync(f))));
          } else continue;
          paths.push(value.path);
        }
        commits.push({ title: lines[0].value.summary, paths });
        return json(res, 200, { commitOid: sha('sha1', Buffer.from(JSON.stringify(paths))), commitUrl: `${origin}/${m[1]}/commit/x` });
      }
      json(res, 404, { error: `no route ${req.method} ${p}` });
    })().catch((e: Error) => json(res, 500, { error: e.message }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    endpoint: origin,
    repos,
    ranges,
    commits,
    cutOnce: (path, bytes) => void cuts.set(path, bytes),
    corrupt: (path, on) => void (on ? corrupted.add(path) : corrupted.delete(path)),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }).finally(() => rmSync(store, { recursive: true, force: true })),
  };
}
