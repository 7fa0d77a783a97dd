// The CLI's sources bundled into one module, built on first use and again whenever a source it
// was built from changes (a build cache, as tsx caches each file). Why: through tsx's loader every
// process start resolved and loaded some 250 modules on a hook thread, 1.2-1.5 s and about 2 s of
// CPU a start, and a run starts a controller and a process per worker (docs/experiments.md, "The
// CI run's length" 4). The bundle holds the workspace's sources and the npm packages they use, but
// for RUNTIME_IMPORTS. Where the cache cannot be written or the sources do not build, the caller
// runs them through tsx.
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const REPO_ROOT = resolve(import.meta.dirname, '..', '..', '..');
const CLI_SOURCE = resolve(import.meta.dirname, '..', 'src', 'cli.ts');
const CACHE_DIR = join(REPO_ROOT, '.cache', 'cli');
const MANIFEST = join(CACHE_DIR, 'manifest.json');
/**
 * Packages imported from node_modules at run time rather than bundled: native addons and
 * WebAssembly that their own code finds on disk. npm packages in the bundle are stamped by
 * node_modules/.package-lock.json, which every npm install or ci rewrites.
 */
const RUNTIME_IMPORTS = ['onnxruntime-node', 'msgpackr-extract', '@huggingface/hub', 'esbuild', 'tsx'];
const NPM_STAMP = join(REPO_ROOT, 'node_modules', '.package-lock.json');
const isWorkspace = (file) => !file.split(/[\\/]/).includes('node_modules');
/** Bundles kept besides the current one: a process that read the manifest just before a rebuild still finds its file. */
const KEEP_OLD = 2;

/** What a file's content is taken to be from: size and modification time (as make and tsx's cache do). */
const stamp = (file) => {
  const s = statSync(file, { throwIfNoEntry: false });
  return s ? `${s.size}:${s.mtimeMs}` : 'missing';
};

/**
 * The manifest's bundle when every file and folder it was built from is as it was. Folders count
 * because a file added to one (a new command) changes what the CLI would find there.
 */
function currentBundle() {
  let m;
  try {
    m = JSON.parse(readFileSync(MANIFEST, 'utf8'));
  } catch {
    return undefined;
  }
  for (const [rel, s] of Object.entries(m.inputs)) if (stamp(join(REPO_ROOT, rel)) !== s) return undefined;
  return join(CACHE_DIR, m.bundle);
}

/** Rewrites import.meta.{url,dirname,filename} to the source file's own, so paths relative to a source still resolve. */
const sourceMeta = (file, text) =>
  text
    .replaceAll('import.meta.url', JSON.stringify(pathToFileURL(file).href))
    .replaceAll('import.meta.dirname', JSON.stringify(dirname(file)))
    .replaceAll('import.meta.filename', JSON.stringify(file));

async function build() {
  const { build: esbuild } = await import('esbuild');
  // Each file's stamp is taken before it is read: a file saved during the build then differs from
  // its stamp and the next start builds again.
  const stamps = new Map();
  const stampOnce = (f) => stamps.has(f) || stamps.set(f, stamp(f));
  // cli.ts imports its commands by a template literal, which esbuild bundles as every file of the
  // folder; the folder's stamp notices a command added.
  stampOnce(join(dirname(CLI_SOURCE), 'commands'));
  stampOnce(NPM_STAMP);
  const result = await esbuild({
    entryPoints: [CLI_SOURCE],
    bundle: true,
    write: false,
    outfile: join(CACHE_DIR, 'trainer-ctl.mjs'), // not written: it makes the source map's paths relative to the cache
    format: 'esm',
    platform: 'node',
    target: 'node20',
    sourcemap: 'inline',
    sourcesContent: false, // file and line are enough; the sources' text made the map 8 MB larger and each start 0.1 s slower
    // CommonJS packages inside an ES module: their require, __filename and __dirname.
    banner: {
      js: [
        "import { createRequire as __bundleRequire } from 'node:module';",
        "import { fileURLToPath as __bundlePath } from 'node:url';",
        "import { dirname as __bundleDir } from 'node:path';",
        'const require = __bundleRequire(import.meta.url);',
        'const __filename = __bundlePath(import.meta.url);',
        'const __dirname = __bundleDir(__filename);',
      ].join(' '),
    },
    logLevel: 'silent',
    plugins: [
      {
        name: 'source-locations',
        setup(b) {
          b.onResolve({ filter: /^[^./]/ }, (a) =>
            RUNTIME_IMPORTS.some((p) => a.path === p || a.path.startsWith(`${p}/`)) ? { path: a.path, external: true } : undefined,
          );
          // Every file the bundle takes in passes here: the workspace's are stamped (before they are read).
          b.onLoad({ filter: /.*/ }, (a) => {
            if (isWorkspace(a.path)) {
              stampOnce(dirname(a.path));
              stampOnce(a.path);
            }
            if (!/\.[cm]?[jt]s$/.test(a.path)) return undefined;
            return { contents: sourceMeta(a.path, readFileSync(a.path, 'utf8')), loader: /\.[cm]?ts$/.test(a.path) ? 'ts' : 'js' };
          });
        },
      },
    ],
  });
  const code = result.outputFiles[0].text;
  const name = `trainer-ctl-${createHash('sha256').update(code).digest('hex').slice(0, 16)}.mjs`;
  mkdirSync(CACHE_DIR, { recursive: true });
  const tmp = (f) => `${f}.tmp-${process.pid}`;
  writeFileSync(tmp(join(CACHE_DIR, name)), code);
  renameSync(tmp(join(CACHE_DIR, name)), join(CACHE_DIR, name));
  const inputs = [...stamps].sort(([a], [b]) => (a < b ? -1 : 1)).map(([f, s]) => [relative(REPO_ROOT, f), s]);
  const manifest = { bundle: name, inputs: Object.fromEntries(inputs) };
  writeFileSync(tmp(MANIFEST), JSON.stringify(manifest, null, 1));
  renameSync(tmp(MANIFEST), MANIFEST);
  const old = readdirSync(CACHE_DIR)
    .filter((f) => /^trainer-ctl-[0-9a-f]+\.mjs$/.test(f) && f !== name)
    .map((f) => ({ f, t: statSync(join(CACHE_DIR, f)).mtimeMs }))
    .sort((a, b) => b.t - a.t);
  for (const { f } of old.slice(KEEP_OLD)) rmSync(join(CACHE_DIR, f), { force: true });
  return join(CACHE_DIR, name);
}

/**
 * The CLI's `main(argv)` from the bundle, building it when the sources changed; undefined when it
 * cannot be had (no writable cache, a source that does not build), for the caller to use tsx.
 */
export async function bundledCli() {
  let file = currentBundle();
  if (!file) {
    try {
      file = await build();
    } catch {
      return undefined;
    }
  }
  process.setSourceMapsEnabled(true);
  return (await import(pathToFileURL(file).href)).main;
}
