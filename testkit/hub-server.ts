/**
 * A local HTTP server speaking the part of the Hugging Face Hub's protocol that
 * @huggingface/hub and trainer-ctl use: file listing (GET /api/models/<id>/tree/<rev>, with
 * git blob SHA-1 and LFS SHA-256 checksums), file download with Range requests
 * (GET /<id>/resolve/<rev>/<path>), repository creation, preupload, the LFS batch API with
 * basic PUT transfers, and NDJSON commits. Repositories can be gated (a token needed), and a
 * file can be served cut after some bytes (an interrupted download) or with a flipped byte
 * (a checksum mismatch).
 */
import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface HubRepo {
  files: Map<string, Buffer>;
  /** Tokens allowed to read; none: public. */
  gatedFor?: string[];
}

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

export async function startLocalHub(): Promise<LocalHub> {
  const repos = new Map<string, HubRepo>();
  const ranges = new Map<string, string[]>();
  const cuts = new Map<string, number>();
  const corrupted = new Set<string>();
  const lfsObjects = new Map<string, Buffer>();
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
        res.writeHead(from ? 206 : 200, { 'content-length': data.length, ...(from ? { 'content-range': `bytes ${from}-${file.length - 1}/${file.length}` } : {}) });
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
        return json(res, 200, { files: b.files.map((f) => ({ path: f.path, uploadMode: isLfs(f.path) ? 'lfs' : 'regular', shouldIgnore: false })) });
      }
      if (req.method === 'POST' && (m = /^\/([^/]+\/[^/]+)\.git\/info\/lfs\/objects\/batch$/.exec(p))) {
        const b = JSON.parse((await body(req)).toString()) as { objects: { oid: string; size: number }[] };
        return json(res, 200, { transfer: 'basic', objects: b.objects.map((o) => ({ ...o, actions: { upload: { href: `${origin}/lfs-upload/${o.oid}` } } })) });
      }
      if (req.method === 'PUT' && (m = /^\/lfs-upload\/([0-9a-f]{64})$/.exec(p))) {
        const b = await body(req);
        if (sha('sha256', b) !== m[1]) return json(res, 400, { error: 'sha256 mismatch' });
        lfsObjects.set(m[1], b);
        res.writeHead(200);
        return void res.end();
      }
      if (req.method === 'POST' && (m = /^\/api\/models\/([^/]+\/[^/]+)\/commit\/[^/]+$/.exec(p))) {
        const repo = repos.get(m[1]);
        if (!repo) return json(res, 404, { error: 'Repository not found' });
        const lines = (await body(req)).toString().split('\n').filter(Boolean).map((l) => JSON.parse(l) as { key: string; value: Record<string, string> });
        const paths: string[] = [];
        for (const { key, value } of lines) {
          if (key === 'file') repo.files.set(value.path, Buffer.from(value.content, 'base64'));
          else if (key === 'lfsFile') {
            const obj = lfsObjects.get(value.oid);
            if (!obj) return json(res, 400, { error: `LFS object ${value.oid} was not uploaded` });
            repo.files.set(value.path, obj);
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
      }),
  };
}
