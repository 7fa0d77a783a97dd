/**
 * Writes deploy/k8s/schema/kubernetes-openapi.json: the definitions of the Kubernetes API's own
 * OpenAPI (v2) document, api/openapi-spec/swagger.json of the Go module k8s.io/kubernetes at the
 * pinned version, taken from the Go module proxy by `go mod download`, cut down to the kinds the
 * manifests use and every definition they reference. Definitions are copied unchanged, so the
 * file can be compared with the module's (--check); the test adapts them for JSON Schema.
 *
 *   npx tsx deploy/k8s/schema/vendor.ts [--check]
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const MODULE = 'k8s.io/kubernetes';
const VERSION = 'v1.34.4';
const SPEC = 'api/openapi-spec/swagger.json';
/** group/version/kind of every resource deploy/k8s renders (the test fails on any other). */
const KINDS = [
  { group: '', version: 'v1', kind: 'ConfigMap' },
  { group: '', version: 'v1', kind: 'Service' },
  { group: '', version: 'v1', kind: 'PersistentVolumeClaim' },
  { group: '', version: 'v1', kind: 'Pod' },
  { group: 'apps', version: 'v1', kind: 'Deployment' },
  { group: 'apps', version: 'v1', kind: 'StatefulSet' },
  { group: 'batch', version: 'v1', kind: 'Job' },
];
const OUT = join(import.meta.dirname, 'kubernetes-openapi.json');

type Gvk = { group: string; version: string; kind: string };
type Definition = Record<string, unknown> & { 'x-kubernetes-group-version-kind'?: Gvk[] };

function moduleDir(): string {
  const out = execFileSync('go', ['mod', 'download', '-json', `${MODULE}@${VERSION}`], {
    encoding: 'utf8',
    // Outside any Go module; the pinned toolchain is whichever go is installed (the module needs no build).
    env: { ...process.env, GOFLAGS: '-mod=mod', GOTOOLCHAIN: 'local' },
    cwd: import.meta.dirname,
  });
  return (JSON.parse(out) as { Dir: string }).Dir;
}

function refsOf(v: unknown, into: Set<string>): void {
  if (Array.isArray(v)) for (const x of v) refsOf(x, into);
  else if (v !== null && typeof v === 'object')
    for (const [k, x] of Object.entries(v)) {
      if (k === '$ref' && typeof x === 'string') into.add(x.replace('#/definitions/', ''));
      else refsOf(x, into);
    }
}

export function build(specText: string): Record<string, unknown> {
  const spec = JSON.parse(specText) as { info: { version: string }; definitions: Record<string, Definition> };
  const kinds: Record<string, string> = {};
  for (const want of KINDS) {
    const name = Object.keys(spec.definitions).find((n) =>
      spec.definitions[n]['x-kubernetes-group-version-kind']?.some(
        (g) => g.group === want.group && g.version === want.version && g.kind === want.kind,
      ),
    );
    if (!name) throw new Error(`${MODULE}@${VERSION} has no definition of ${JSON.stringify(want)}`);
    kinds[`${want.group ? `${want.group}/` : ''}${want.version}/${want.kind}`] = name;
  }
  const keep = new Set<string>();
  const todo = Object.values(kinds);
  while (todo.length) {
    const name = todo.pop()!;
    if (keep.has(name)) continue;
    keep.add(name);
    const refs = new Set<string>();
    refsOf(spec.definitions[name], refs);
    todo.push(...refs);
  }
  return {
    source: `Go module ${MODULE}@${VERSION}, ${SPEC}, sha256 ${createHash('sha256').update(specText).digest('hex')}`,
    generator: 'deploy/k8s/schema/vendor.ts',
    kinds,
    definitions: Object.fromEntries([...keep].sort().map((n) => [n, spec.definitions[n]])),
  };
}

const text = `${JSON.stringify(build(readFileSync(join(moduleDir(), SPEC), 'utf8')), null, 1)}\n`;
if (process.argv.includes('--check')) {
  if (readFileSync(OUT, 'utf8') !== text) {
    console.error(`${OUT} differs from what ${MODULE}@${VERSION} gives: run npx tsx deploy/k8s/schema/vendor.ts`);
    process.exit(1);
  }
  console.log(`${OUT} matches ${MODULE}@${VERSION}`);
} else {
  writeFileSync(OUT, text);
  console.log(`wrote ${OUT}`);
}
