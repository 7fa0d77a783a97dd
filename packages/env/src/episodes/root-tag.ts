/**
 * ORACL's answer: the content of the `<root>` tag (Alg. 1, lines 13-15), read into ranked root
 * causes. Accepted forms: a JSON array of {pod|service|node|component, type} objects, or one
 * cause per line (or separated by ';') as "name | type", "name: type", "name (type)" or "name".
 * Names resolve through the topology (after `alias`, which maps a pod alias the model was shown to
 * its pod); a name it does not know is kept as a service name.
 */
import type { RootCause, Topology } from '../types';

export type RootParse = { ok: true; answer: RootCause[] } | { ok: false; error: string };

const ROOT = /<root>([\s\S]*?)<\/root>/i;

type Alias = (name: string) => string;

function cause(topology: Topology, alias: Alias, name: string, type: string | undefined): RootCause | undefined {
  const n = name
    .trim()
    .replace(/^[-*\d.)\s]+(?=\S)/, '')
    .replace(/^["'`]|["'`]$/g, '')
    .trim();
  if (!n) return undefined;
  const r = topology.resolve(alias(n));
  // A pod names its service too, but not its host: the answer blames the pod, not the node.
  const out: RootCause =
    r?.level === 'node'
      ? { node: r.node }
      : r?.level === 'pod'
        ? { ...(r.service ? { service: r.service } : {}), pod: r.pod }
        : { service: r?.service ?? n };
  const t = type?.trim();
  if (t) out.type = t;
  return out;
}

function fromJson(topology: Topology, alias: Alias, text: string): RootCause[] | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  const items = Array.isArray(v) ? v : [v];
  const out: RootCause[] = [];
  for (const it of items) {
    if (typeof it !== 'object' || it === null) return undefined;
    const o = it as Record<string, unknown>;
    const name = [o.pod, o.component, o.service, o.node].find((x): x is string => typeof x === 'string' && x.trim() !== '');
    if (!name) return undefined;
    const c = cause(topology, alias, name, typeof o.type === 'string' ? o.type : undefined);
    if (c) out.push(c);
  }
  return out;
}

export function parseRootTag(text: string, topology: Topology, alias: Alias = (name) => name): RootParse {
  const m = ROOT.exec(text);
  if (!m) return { ok: false, error: 'no <root>...</root> in the answer' };
  const body = m[1].trim();
  if (!body) return { ok: false, error: 'the <root> tag is empty' };
  const json = body.startsWith('[') || body.startsWith('{') ? fromJson(topology, alias, body) : undefined;
  if (json) return json.length ? { ok: true, answer: json } : { ok: false, error: 'the <root> tag names no component' };
  const answer: RootCause[] = [];
  for (const line of body.split(/[\n;]+/)) {
    const l = line.trim();
    if (!l) continue;
    const paren = /^(.*?)\s*\(([^()]*)\)\s*$/.exec(l);
    const [name, type] = paren ? [paren[1], paren[2]] : l.split(/\s*[|:]\s*|\s+-\s+/, 2);
    const c = cause(topology, alias, name, type);
    if (c) answer.push(c);
  }
  return answer.length ? { ok: true, answer } : { ok: false, error: 'the <root> tag names no component' };
}
